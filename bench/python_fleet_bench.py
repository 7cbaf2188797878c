#!/usr/bin/env python3
"""2,000 tiny models from Python (`nnfleet.train`) against the same plan from the CLI (`nnfleet
train plan.yaml --out ...`): wall time and peak RSS of each process (/usr/bin/time -v), printed
as one markdown row. Issue 34's target: Python within 1.3x of the CLI's time, comparable memory.

    PYTHONPATH=build/python python3 bench/python_fleet_bench.py [--models 2000] [--epochs 2]
        [--workers 2] [--verbose 0] [--cli build/nnfleet]

The models: Flatten -> Dense 8 relu -> Dense 10 softmax on scikit-learn's digits (1,797 8x8
images; Debian python3-sklearn), batch 32, Adam, 20% validation. Both processes include their
start: the interpreter and `import nnfleet` (about 0.2 s) for Python, the plan's parse for the
CLI (Python's plan is the same JSON, made in memory).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time
import numpy as np
import nnfleet
d = sys.argv[1]
plan = json.load(open(d + "/plan.json"))
x, y = np.load(d + "/x.npy"), np.load(d + "/y.npy")
t = time.monotonic()
run = nnfleet.train(plan["models"], x, y, validation_split=0.2, workers=int(sys.argv[2]),
                    verbose=int(sys.argv[3]), seed=plan["seed"], **plan["defaults"])
print("train_seconds", time.monotonic() - t, len(run), file=sys.stderr)
"""


def write_inputs(d, models, epochs):
    from sklearn.datasets import load_digits
    import numpy as np
    digits = load_digits()
    np.save(os.path.join(d, "x.npy"), (digits.images / 16.0).astype(np.float32)[..., None])
    np.save(os.path.join(d, "y.npy"), digits.target.astype(np.int32))
    layers = [{"Flatten": {}}, {"Dense": {"units": 8, "activation": "relu"}},
              {"Dense": {"units": 10, "activation": "softmax"}}]
    plan = {"seed": 1,
            "data": {"train": {"x": "x.npy", "y": "y.npy"}, "validation_split": 0.2},
            "defaults": {"epochs": epochs, "batch_size": 32, "optimizer": "adam",
                         "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]},
            "models": [{"name": f"m{k:04d}", "layers": layers} for k in range(models)]}
    with open(os.path.join(d, "plan.json"), "w") as f:
        json.dump(plan, f)
    return os.path.join(d, "plan.json")


def timed(cmd, env=None):
    """(wall seconds, peak RSS MB, stderr) of `cmd` under /usr/bin/time -v."""
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr)[1]
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)[1]) / 1024
    return seconds, rss, p.stderr


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--models", type=int, default=2000)
    a.add_argument("--epochs", type=int, default=2)
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--verbose", type=int, default=0, choices=(0, 1, 2))
    a.add_argument("--cli", default=os.environ.get(
        "NNFLEET_BIN", os.path.join(HERE, "..", "build", "nnfleet")))
    o = a.parse_args()
    with tempfile.TemporaryDirectory(prefix="nnfleet-bench-") as d:
        plan = write_inputs(d, o.models, o.epochs)
        cli_s, cli_mb, _ = timed([o.cli, "train", plan, "--out", os.path.join(d, "cli"),
                                  "--workers", str(o.workers), "--quiet"])
        py_s, py_mb, err = timed([sys.executable, "-c", CHILD, d, str(o.workers),
                                  str(o.verbose)])
        inner = float(re.search(r"train_seconds (\S+)", err)[1])
    print("| models x epochs | CLI wall s | CLI peak MB | Python wall s (train() s) | "
          "Python peak MB | Python / CLI |")
    print("|---|---|---|---|---|---|")
    print(f"| {o.models} x {o.epochs} (verbose={o.verbose}) | {cli_s:.2f} | {cli_mb:.0f} | "
          f"{py_s:.2f} ({inner:.2f}) | {py_mb:.0f} | {py_s / cli_s:.2f}x |")


if __name__ == "__main__":
    main()
