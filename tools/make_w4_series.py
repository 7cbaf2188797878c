#!/usr/bin/python3
"""Writes W4's data (/work/shared/workloads.md, "W4: one small model per series"): 32 synthetic
series cut into sliding windows of 48 steps, as .npy files in OUT (default build/bench-data/w4).

  series_<kk>_train_x.npy  float32 [3238, 48, 1]   the 48 values before each target
  series_<kk>_train_y.npy  float32 [3238, 1]       the next value
  series_<kk>_test_x.npy / series_<kk>_test_y.npy  the last 20% of the windows, in time order

The series follow the workload's definition exactly (its generator is the reference; this is the
project's own copy so that a clean clone needs nothing outside it): series k has two seasonal
waves of periods 12 + 3k and (12 + 3k)(2.5 + 0.05k), a slow trend, Gaussian noise from
default_rng(1000 + k), and is standardized. Deterministic: the same bytes on every machine.

usage: tools/make_w4_series.py [OUT] [--series N]   (numpy only)"""
import argparse
import os

import numpy as np

SERIES, LENGTH, WINDOW, TEST_FRACTION = 32, 4096, 48, 0.2


def series(k):
    rng = np.random.default_rng(1000 + k)
    t = np.arange(LENGTH, dtype=np.float64)
    p1 = 12.0 + 3.0 * k
    p2 = p1 * (2.5 + 0.05 * k)
    trend = 0.0005 * (k - SERIES / 2) * t
    v = np.sin(2 * np.pi * t / p1) + 0.5 * np.sin(2 * np.pi * t / p2 + k) + trend
    v += 0.1 * rng.standard_normal(LENGTH)
    return ((v - v.mean()) / v.std()).astype(np.float32)


def windows(v):
    """x[i] = v[i : i + WINDOW] as [WINDOW, 1], y[i] = v[i + WINDOW] as [1]."""
    n = len(v) - WINDOW
    idx = np.arange(WINDOW)[None, :] + np.arange(n)[:, None]
    return v[idx][..., None], v[WINDOW:][:, None]


def write_atomic_npy(path, a):
    tmp = f"{path}.tmp.{os.getpid()}.npy"
    np.save(tmp, np.ascontiguousarray(a))
    os.replace(tmp, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(here, "..", "build", "bench-data", "w4"))
    ap.add_argument("--series", type=int, default=SERIES, help="write only series 0..N-1")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for k in range(min(a.series, SERIES)):
        x, y = windows(series(k))
        cut = int(len(x) * (1 - TEST_FRACTION))
        for part, sl in (("train", slice(0, cut)), ("test", slice(cut, None))):
            write_atomic_npy(os.path.join(a.out, f"series_{k:02d}_{part}_x.npy"), x[sl])
            write_atomic_npy(os.path.join(a.out, f"series_{k:02d}_{part}_y.npy"), y[sl])
    print(f"wrote {min(a.series, SERIES)} series x (train, test) windows of {WINDOW} to {a.out}")


if __name__ == "__main__":
    main()
