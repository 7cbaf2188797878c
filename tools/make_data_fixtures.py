#!/usr/bin/python3
"""Writes the small data files tests/data/ reads, with numpy, deterministically.

Run from anywhere:  /usr/bin/python3 tools/make_data_fixtures.py
Needs python3-numpy (scripts/setup --tools). Output: tests/data/fixtures/ (a few KB), plus
expected.txt, one line per array a loader must produce:

    <file> <npz key or -> <dtype> <shape as d0,d1,... or "scalar"> <values in C order...>

The dtype and values are what nnfleet must return (after its documented widening: |b1 -> uint8,
|i1 <i2 <u2 -> int32); floats are written with repr(), which round-trips exactly. Files that a
loader must reject are listed in the REJECTED table below with the reason the test checks.
"""
import gzip
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "fixtures")

# What nnfleet loads each numpy dtype as.
NNFLEET_DTYPE = {
    "u1": "uint8", "b1": "uint8", "i1": "int32", "u2": "int32", "i2": "int32",
    "i4": "int32", "i8": "int64", "f4": "float32", "f8": "float64",
}

# Arrays that load: file name -> array (saved with np.save, format version 1.0).
LOADABLE = {
    "u1_2x3.npy": (np.arange(6, dtype=np.uint8) * 50).reshape(2, 3),
    "i4_4.npy": np.array([-2**31, -1, 0, 2**31 - 1], dtype="<i4"),
    "i8_2x2.npy": np.array([[-2**40, -1], [0, 2**40 + 3]], dtype="<i8"),
    "f4_2x3x2x2.npy": (np.arange(24, dtype=np.float32) * 0.5 - 3).reshape(2, 3, 2, 2),
    "f8_scalar.npy": np.array(3.25, dtype="<f8"),
    "f8_3.npy": np.array([0.1, -2.5, 1e300], dtype="<f8"),
    "b1_3.npy": np.array([True, False, True]),
    "i1_4.npy": np.array([-128, -1, 0, 127], dtype="i1"),
    "u2_3.npy": np.array([0, 1, 65535], dtype="<u2"),
    "i2_4.npy": np.array([-32768, -1, 0, 32767], dtype="<i2"),
    "f4_0x3.npy": np.zeros((0, 3), dtype="<f4"),
}
# Same data, newer header versions: name -> (array, version).
VERSIONED = {
    "f4_v2.npy": (np.arange(4, dtype="<f4").reshape(2, 2) + 0.25, (2, 0)),
    "u1_v3.npy": (np.array([7, 8, 9], dtype=np.uint8), (3, 0)),
}
# Files every loader must reject, and why (the test checks the message names the reason).
REJECTED = {
    "f8_fortran.npy": np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)),
    "i4_bigendian.npy": np.arange(4, dtype=">i4"),
    "c8.npy": np.arange(3, dtype="<c8"),
    "structured.npy": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]),
}
NPZ = {"x": np.arange(6, dtype="<f4").reshape(2, 3) / 4, "y": np.array([3, -4], dtype="<i8")}

# IDX (big-endian header, unsigned bytes): images[i, r, c] and labels.
IDX_IMAGES = ((np.arange(3 * 4 * 5) * 37) % 256).astype(np.uint8).reshape(3, 4, 5)
IDX_LABELS = np.array([7, 0, 9], dtype=np.uint8)

CSV = "a,b,label,c\n1,2.5,0,-3\n4,5,1,6e-1\n\n7,8,2,9\n"
CSV_FLOAT_LABEL = "x,y\r\n0.5,1.25\r\n1.5,-2\r\n"


def idx_bytes(a):
    header = struct.pack(">BBBB", 0, 0, 0x08, a.ndim) + struct.pack(">%dI" % a.ndim, *a.shape)
    return header + a.tobytes()


def expected_line(name, key, a):
    code = a.dtype.str[1:]
    shape = ",".join(str(d) for d in a.shape) if a.ndim else "scalar"
    flat = a.reshape(-1)
    if a.dtype.kind == "f":
        values = [repr(float(v)) for v in flat]
    else:
        values = [str(int(v)) for v in flat]
    return " ".join([name, key, NNFLEET_DTYPE[code], shape] + values)


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []
    for name, a in LOADABLE.items():
        np.save(os.path.join(OUT, name), a)
        lines.append(expected_line(name, "-", a))
    # A 1-d array with fortran_order True (numpy itself writes False for 1-d, but the layout is
    # the same either way, so it must load): np.save's bytes with the flag flipped.
    a = np.array([1.5, 2.5], dtype="<f8")
    np.save(os.path.join(OUT, "f8_1d_fortran_flag.npy"), a)
    path = os.path.join(OUT, "f8_1d_fortran_flag.npy")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data.replace(b"'fortran_order': False", b"'fortran_order': True ", 1))
    lines.append(expected_line("f8_1d_fortran_flag.npy", "-", a))
    for name, (a, version) in VERSIONED.items():
        with open(os.path.join(OUT, name), "wb") as f:
            np.lib.format.write_array(f, a, version=version)
        lines.append(expected_line(name, "-", a))
    for name, a in REJECTED.items():
        np.save(os.path.join(OUT, name), a)

    # np.savez writes zip entries dated 1980-01-01, so both archives are deterministic.
    np.savez(os.path.join(OUT, "stored.npz"), **NPZ)
    np.savez_compressed(os.path.join(OUT, "deflated.npz"), **NPZ)
    for archive in ("stored.npz", "deflated.npz"):
        for key, a in NPZ.items():
            lines.append(expected_line(archive, key, a))

    images, labels = idx_bytes(IDX_IMAGES), idx_bytes(IDX_LABELS)
    files = {
        "images_3x4x5.idx": images,
        "labels_3.idx": labels,
        "images_3x4x5.idx.gz": gzip.compress(images, mtime=0),
        "labels_3.idx.gz": gzip.compress(labels, mtime=0),
        # gzip data under a plain name: loaders must detect gzip by its magic bytes.
        "labels_gzip_without_suffix.idx": gzip.compress(labels, mtime=0),
        # Two gzip members back to back (as `cat a.gz b.gz` makes) are one stream.
        "labels_two_members.idx.gz": gzip.compress(labels[:6], mtime=0) +
                                     gzip.compress(labels[6:], mtime=0),
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    as_image = IDX_IMAGES.reshape(3, 4, 5, 1)
    for name in ("images_3x4x5.idx", "images_3x4x5.idx.gz"):
        lines.append(expected_line(name, "-", as_image))
    for name in ("labels_3.idx", "labels_3.idx.gz", "labels_gzip_without_suffix.idx",
                 "labels_two_members.idx.gz"):
        lines.append(expected_line(name, "-", IDX_LABELS))

    with open(os.path.join(OUT, "table.csv"), "w", newline="") as f:
        f.write(CSV)
    with open(os.path.join(OUT, "table_float_label.csv"), "w", newline="") as f:
        f.write(CSV_FLOAT_LABEL)

    with open(os.path.join(OUT, "expected.txt"), "w") as f:
        f.write("# Written by tools/make_data_fixtures.py; see its docstring for the format.\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
