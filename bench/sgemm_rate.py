#!/usr/bin/python3
"""Single-threaded fp32 GEMM rate, C = A x B with M = K = N = 512 (workloads.md "The limit"), for
the benchmark's ceiling figures. Prints one JSON line.

  sgemm_rate.py --core C [--openblas LIBDIR] [--seconds S]

Measures, pinned to one core with one thread each: OpenBLAS's cblas_sgemm called through ctypes
(from LIBDIR/libopenblas.so.0, when given and present), torch.mm and numpy's matmul (which use
whatever libblas.so.3 this process loaded; the library is named in the output). Each rate is the
best of 3 timed runs of S seconds of this thread's CPU time (so another process sharing the core
does not lower it), operands hot in cache, after a warm-up.
"""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

N = 512


def rate(fn, seconds):
    fn()
    best = 0.0
    for _ in range(3):
        t = time.thread_time()
        k = 0
        while True:
            fn()
            k += 1
            el = time.thread_time() - t
            if el >= seconds:
                break
        best = max(best, 2.0 * N ** 3 * k / el / 1e9)
    return best


def loaded_blas():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "blas" in os.path.basename(p):
                libs.add(os.path.realpath(p))
    return sorted(libs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--core", type=int, required=True)
    ap.add_argument("--openblas", help="folder with libopenblas.so.0")
    ap.add_argument("--seconds", type=float, default=0.5)
    a = ap.parse_args()
    os.sched_setaffinity(0, {a.core})
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    A = rng.random((N, N), dtype=np.float32)
    B = rng.random((N, N), dtype=np.float32)
    C = np.zeros((N, N), np.float32)
    out = {"n": N}

    lib_path = os.path.join(a.openblas, "libopenblas.so.0") if a.openblas else None
    if lib_path and os.path.exists(lib_path):
        lib = ctypes.CDLL(lib_path)
        lib.openblas_set_num_threads(1)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        fp = ctypes.POINTER(ctypes.c_float)
        args = (101, 111, 111, N, N, N, ctypes.c_float(1.0), A.ctypes.data_as(fp), N,
                B.ctypes.data_as(fp), N, ctypes.c_float(0.0), C.ctypes.data_as(fp), N)
        lib.cblas_sgemm(*args)
        err = float(np.abs(C - A @ B).max())
        if err > 1e-2:
            sys.exit(f"sgemm_rate: OpenBLAS cblas_sgemm gave a wrong product (max error {err})")
        out["openblas"] = {"gflops": rate(lambda: lib.cblas_sgemm(*args), a.seconds),
                           "library": os.path.realpath(lib_path),
                           "core": lib.openblas_get_corename().decode()}
    else:
        out["openblas"] = None

    ta, tb = torch.from_numpy(A), torch.from_numpy(B)
    out["torch"] = {"gflops": rate(lambda: torch.mm(ta, tb), a.seconds),
                    "version": torch.__version__}
    out["numpy"] = {"gflops": rate(lambda: np.matmul(A, B, out=C), a.seconds),
                    "version": np.__version__}
    out["blas_loaded"] = loaded_blas()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
