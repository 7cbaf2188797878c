#!/usr/bin/python3
"""Per-model overhead of a fleet of tiny models (issue 10's "8,000 tiny models" figure).

Makes 64 samples of 8x8x1 inputs and 3 classes, and a plan of N tiny models (cli_test's
tiny_plan: Flatten, Dense(1..8), Dense(3); 8 widths x N/8 learning rates; 1 epoch), then runs
`nnfleet train` on it R times, each into a fresh output folder (ext4 slows down creating files
where many were just deleted, so folders are removed only at the end) after a sync (no run pays
for the previous one's writeback). With --vs a second binary runs in turn, A B A B ...

Each run prints its phases from the run's own timeline.jsonl: launch to the first model's start,
the models, and the last model's end to the process's exit, and the overhead per model: the
wall time less the training time the models report (results.json, summed over models and shared
by the workers), divided by N. The medians close the output.

    /usr/bin/python3 bench/tiny_overhead.py --nnfleet build/nnfleet --models 8000 --runs 5
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import time

import numpy as np


def tiny_plan(n):
    lrs = ", ".join(str(0.001 + i * 1e-6) for i in range(n // 8))
    return ("seed: 1\ndata:\n  train: {x: tiny_x.npy, y: tiny_y.npy}\ndefaults:\n  epochs: 1\n"
            "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\nmodels:\n"
            "  - name: t-{u}-{lr}\n    grid: {u: [1, 2, 3, 4, 5, 6, 7, 8], lr: [" + lrs + "]}\n"
            "    optimizer: {Adam: {learning_rate: \"{lr}\"}}\n    layers:\n      - Flatten: {}\n"
            "      - Dense: {units: \"{u}\", activation: relu}\n"
            "      - Dense: {units: 3, activation: softmax}\n")


def write_inputs(folder, n):
    """The data (64 samples of 8x8x1, 3 classes) and the plan of n tiny models in `folder`;
    returns the plan's path."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    np.save(os.path.join(folder, "tiny_x.npy"),
            rng.standard_normal((64, 8, 8, 1)).astype(np.float32))
    np.save(os.path.join(folder, "tiny_y.npy"), rng.integers(0, 3, 64).astype(np.int32))
    plan = os.path.join(folder, f"t{n}.yaml")
    with open(plan, "w") as f:
        f.write(tiny_plan(n))
    return plan


def command(binary, plan, out, workers):
    return [binary, "train", plan, "--out", out, "--workers", str(workers), "--quiet"]


def phases(out, start, end, workers, n):
    """A finished run's phases (from its timeline.jsonl) and overhead per model, in ms: the wall
    time less the training time its models report, shared by the workers, over n."""
    with open(os.path.join(out, "timeline.jsonl")) as f:
        events = [json.loads(line) for line in f]
    # A job's own line carries its start: a run of more than 1,000 models writes no separate
    # "start" lines (timeline.h).
    first = min(e["start"] for e in events if e.get("kind") == "job")
    last = max(e["end"] for e in events if e.get("kind") == "job")
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    models = results["models"] if isinstance(results, dict) else results
    training = sum(m.get("seconds", 0.0) for m in models)
    wall = end - start
    return {"wall": wall, "launch": first - start, "models": last - first, "tail": end - last,
            "overhead_ms": (wall - training / workers) / n * 1e3}


def one_run(binary, plan, out, workers, n):
    subprocess.run(["sync"], check=True)
    time.sleep(1)
    start = time.time()
    subprocess.run(command(binary, plan, out, workers), check=True)
    return phases(out, start, time.time(), workers, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnfleet", default="build/nnfleet")
    ap.add_argument("--vs", help="a second nnfleet binary, run in turn with the first")
    ap.add_argument("--models", type=int, default=8000, help="a multiple of 8")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default="build/bench/tiny-overhead")
    ap.add_argument("--keep", action="store_true",
                    help="leave the run folders (delete them later: for minutes after thousands of "
                         "files are deleted, ext4 creates new ones slower, up to 5 s of system "
                         "time in a run of 8,000 models against 0.9 s, which would land on the "
                         "next measurement)")
    a = ap.parse_args()
    if a.models <= 0 or a.models % 8:
        ap.error(f"--models: expected a positive multiple of 8, got {a.models}")
    plan = write_inputs(a.dir, a.models)
    binaries = {"A": os.path.abspath(a.nnfleet)}
    if a.vs:
        binaries["B"] = os.path.abspath(a.vs)
    made, rows = [], {k: [] for k in binaries}
    try:
        for r in range(a.runs):
            for tag, binary in binaries.items():
                out = os.path.join(a.dir, f"run-{tag}-{r}-{os.getpid()}")
                made.append(out)
                row = one_run(binary, plan, out, a.workers, a.models)
                rows[tag].append(row)
                print(f"{tag} run {r + 1}: wall {row['wall']:.2f} s (launch {row['launch']:.2f}, "
                      f"models {row['models']:.2f}, tail {row['tail']:.2f}); "
                      f"overhead {row['overhead_ms']:.3f} ms per model", flush=True)
    finally:
        for out in made if not a.keep else []:
            shutil.rmtree(out, ignore_errors=True)
    for tag, binary in binaries.items():
        med = {k: statistics.median(r[k] for r in rows[tag]) for k in rows[tag][0]}
        print(f"{tag} {binary}: median wall {med['wall']:.2f} s, launch {med['launch']:.2f} s, "
              f"models {med['models']:.2f} s, tail {med['tail']:.2f} s, overhead "
              f"{med['overhead_ms']:.3f} ms per model ({a.models} models, {a.workers} workers)")


if __name__ == "__main__":
    main()
