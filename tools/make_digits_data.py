#!/usr/bin/python3
"""Writes the W3 data set (scikit-learn's digits) as .npy files, deterministically.

Usage:  /usr/bin/python3 tools/make_digits_data.py [OUTDIR]      (default: build/bench-data)
Needs python3-numpy and python3-sklearn (scripts/setup --bench); sklearn ships the data, so
nothing is downloaded.

W3 (/work/shared/workloads.md): sklearn.datasets.load_digits, 1,797 samples of 8x8 = 64 features,
inputs divided by 16, the first 1,437 samples for training and the last 360 for test. Writes

    OUTDIR/digits_x_train.npy  float32 [1437, 64]      OUTDIR/digits_y_train.npy  int32 [1437]
    OUTDIR/digits_x_test.npy   float32 [360, 64]       OUTDIR/digits_y_test.npy   int32 [360]

examples/w3.yaml reads them from ../build/bench-data/ (paths in a plan are relative to the
plan's folder); bench/peers/torch_peer.py reads the same files. Each file is written under a
temporary name and renamed, so a reader never sees half a file.
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

N_TRAIN = 1437
N_TEST = 360


def save_atomic(path, array):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)


def main(argv):
    if len(argv) > 2:
        sys.exit("usage: tools/make_digits_data.py [OUTDIR]")
    here = os.path.dirname(os.path.abspath(__file__))
    out = argv[1] if len(argv) == 2 else os.path.join(here, "..", "build", "bench-data")
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    if x.shape != (N_TRAIN + N_TEST, 64):
        sys.exit(f"failed to load digits: expected shape (1797, 64), got {x.shape}")
    parts = {
        "digits_x_train.npy": x[:N_TRAIN], "digits_y_train.npy": y[:N_TRAIN],
        "digits_x_test.npy": x[N_TRAIN:], "digits_y_test.npy": y[N_TRAIN:],
    }
    for name, a in parts.items():
        save_atomic(os.path.join(out, name), np.ascontiguousarray(a))
    print(f"make_digits_data: wrote {len(parts)} files to {os.path.normpath(out)}")


if __name__ == "__main__":
    main(sys.argv)
