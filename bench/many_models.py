#!/usr/bin/python3
"""100,000 models in one run (issue 36): the overhead, peak memory and disk of a fleet of tiny
models on scikit-learn's digits (W3's data: inputs /16, the first 1,437 samples train, the last
360 test).

Makes the data and a plan of N models (Dense(8, relu), Dense(10, softmax), 1 epoch, Adam; a grid
of N/100 learning rates x 100 repeats), runs `nnfleet train` once per --runs with the given
--save policy (each into a fresh folder, after a sync), and prints one JSON line per run and
their medians: the wall time, the training seconds the models report (results.json) summed, the
fraction of the wall time outside training ((wall - train_sum / workers) / wall), the same
outside the models' jobs (outside_jobs: their building, training, test evaluation and saving, the
workers' busy seconds of timeline.jsonl, against the fleet's own work around them), the peak
resident memory of the process (/usr/bin/time's %M), and the bytes and files left in the output
folder.

    /usr/bin/python3 bench/many_models.py --nnfleet build/nnfleet --models 100000 --runs 3

--two-hosts (root): the same plan once on this machine and once under mpirun across the two
namespaced hosts of tests/mpi/two_hosts.sh (two ranks on each), then every model's results
compared between the two (results.csv without the timing columns): prints the MPI run's figures
and whether the results are identical.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import time

import numpy as np


def write_data(folder):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    np.save(os.path.join(folder, "dx_train.npy"), x[:1437])
    np.save(os.path.join(folder, "dy_train.npy"), y[:1437])
    np.save(os.path.join(folder, "dx_test.npy"), x[1437:])
    np.save(os.path.join(folder, "dy_test.npy"), y[1437:])


def plan_text(n):
    reps = min(100, n)
    lrs = ", ".join("%.8g" % (1e-3 + i * 1e-7) for i in range(max(1, n // reps)))
    return ("seed: 1\ndata:\n  train: {x: dx_train.npy, y: dy_train.npy}\n"
            "  test: {x: dx_test.npy, y: dy_test.npy}\n"
            "defaults:\n  epochs: 1\n  batch_size: 32\n"
            "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\nmodels:\n"
            "  - name: m-{r}-{lr}\n    grid: {r: [" + ", ".join(str(i) for i in range(reps)) +
            "], lr: [" + lrs + "]}\n"
            "    optimizer: {Adam: {learning_rate: \"{lr}\"}}\n    layers:\n"
            "      - Dense: {units: 8, activation: relu}\n"
            "      - Dense: {units: 10, activation: softmax}\n")


def folder_size(out):
    files = size = 0
    for root, _, names in os.walk(out):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(root, name))
    return files, size


def jobs_busy(out):
    """Seconds the workers spent inside the models' jobs (building, training, evaluating,
    saving), from timeline.jsonl: a large fleet's lane lines, else the job lines."""
    lanes = jobs = 0.0
    with open(os.path.join(out, "timeline.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("kind") == "lane":
                lanes += e["busy"]
            elif e.get("kind") == "job":
                jobs += e["end"] - e["start"]
    return lanes or jobs


def one_run(args, plan, out):
    subprocess.run(["sync"], check=True)
    time.sleep(0.5)
    cmd = [args.nnfleet, "train", plan, "--out", out, "--workers", str(args.workers), "--quiet"]
    if args.save:
        cmd += ["--save", args.save]
    # /usr/bin/time's %M: wait4's ru_maxrss of a child forked from this Python process (numpy
    # and sklearn loaded) would count the parent's pages it had before exec.
    rss_file = out + ".rss"
    start = time.time()
    status = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file] + cmd).returncode
    wall = time.time() - start
    if status != 0:
        raise SystemExit("nnfleet failed: " + " ".join(cmd))
    with open(rss_file) as f:
        peak_kb = int(f.read().split()[-1])
    os.remove(rss_file)
    # results.csv has every model's row (results.json of a fleet above 10,000 only the best 100).
    with open(os.path.join(out, "results.csv"), newline="") as f:
        models = list(csv.DictReader(f))
    train = sum(float(m["seconds"] or 0.0) for m in models)
    files, size = folder_size(out)
    busy = jobs_busy(out)
    return {"models": len(models), "wall_s": round(wall, 3), "train_sum_s": round(train, 3),
            "outside_training": round((wall - train / args.workers) / wall, 4),
            "jobs_busy_s": round(busy, 3),
            "outside_jobs": round((wall - busy / args.workers) / wall, 4),
            "peak_rss_mb": round(peak_kb / 1024.0, 1), "bytes_written": size,
            "files_written": files}


HOSTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "mpi",
                     "two_hosts.sh")
TIMING = {"seconds", "samples_per_second", "core"}  # columns that differ between any two runs


def results_rows(out):
    """Every model's row of results.csv without its timing columns, by name."""
    import csv
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["name"]: {k: v for k, v in r.items() if k not in TIMING} for r in rows}


def two_hosts_run(args, plan, out):
    """The plan under mpirun on hosts alpha and beta (two ranks each), as tests/mpi runs it."""
    hosts = os.path.join(args.dir, "hosts-%d" % os.getpid())
    subprocess.run([HOSTS, "up", hosts, str(os.getpid())], check=True)
    try:
        cmd = [HOSTS, "run", hosts, "alpha", "mpirun", "--allow-run-as-root", "--hostfile",
               os.path.join(hosts, "hostfile"), "-np", "4", "--map-by", "ppr:2:node",
               "--bind-to", "none"]
        for k, v in (("plm_rsh_agent", os.path.join(hosts, "agent")), ("btl", "self,vader,tcp"),
                     ("btl_tcp_if_include", "mpi0"), ("oob_tcp_if_include", "mpi0"),
                     ("btl_vader_single_copy_mechanism", "none")):
            cmd += ["--mca", k, v]
        cmd += [os.path.abspath(args.nnfleet), "train", plan, "--out", out, "--quiet"]
        start = time.time()
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit("nnfleet under mpirun failed: " + " ".join(cmd))
        wall = time.time() - start
    finally:
        subprocess.run([HOSTS, "down", hosts])
    files, size = folder_size(out)
    return {"models": len(results_rows(out)), "wall_s": round(wall, 3), "bytes_written": size,
            "files_written": files}


def compare_two_hosts(args, plan):
    local = os.path.join(args.dir, "local-%d" % os.getpid())
    mpi = os.path.join(args.dir, "mpi-%d" % os.getpid())
    row = one_run(args, plan, local)
    print(json.dumps({"local": row}), flush=True)
    row = two_hosts_run(args, plan, mpi)
    a, b = results_rows(local), results_rows(mpi)
    row["identical_results"] = a == b
    row["differing_models"] = sum(1 for k in set(a) | set(b) if a.get(k) != b.get(k))
    print(json.dumps({"two_hosts": row}), flush=True)
    if not args.keep:
        shutil.rmtree(local)
        shutil.rmtree(mpi)
    return 0 if a == b else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnfleet", default="build/nnfleet")
    ap.add_argument("--models", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", default="", help="all | best N | none (default: the plan's default)")
    ap.add_argument("--dir", default="/tmp/nnfleet-many-models")
    ap.add_argument("--keep", action="store_true", help="keep the output folders")
    ap.add_argument("--two-hosts", action="store_true",
                    help="also run under mpirun across two namespaced hosts (root) and compare")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    write_data(args.dir)
    plan = os.path.join(args.dir, "many%d.yaml" % args.models)
    with open(plan, "w") as f:
        f.write(plan_text(args.models))
    if args.two_hosts:
        raise SystemExit(compare_two_hosts(args, plan))
    rows = []
    for i in range(args.runs):
        out = os.path.join(args.dir, "out-%d-%d-%d" % (args.models, os.getpid(), i))
        rows.append(one_run(args, plan, out))
        print(json.dumps(rows[-1]), flush=True)
        if not args.keep:
            shutil.rmtree(out)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    med["runs"] = len(rows)
    med["save"] = args.save or "default"
    print(json.dumps({"median": med}))


if __name__ == "__main__":
    main()
