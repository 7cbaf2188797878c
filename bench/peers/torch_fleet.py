#!/usr/bin/python3
"""The peer's fleet: runs a list of torch_peer.py jobs on N cores, the way the seeds' users do,
and writes one JSON file with what it measured.

  torch_fleet.py --jobs JOBS.json --workers N --mode fresh|pool --out RESULT.json
                 [--cores 0,1] [--n-train N] [--peer-arg ARG ...] [--save-model NAME=PATH]

--mode fresh is the recipe (/work/shared/workloads.md): a pool of N slots, each pinned to its own
core, a fresh `torch_peer.py --job` process per model, at most one process per core at a time,
longest model first (workloads.cost). --mode pool is the long-lived variant: N `torch_peer.py
--serve` workers, one pinned per core, started once, each fed the next job (longest first) as soon
as it answers the previous one.

Measured: makespan (from the first spawn to the last model finished, process exits included),
the peak of the summed resident memory of all the fleet's processes (sampled with psutil every
20 ms; the sum over cores of the largest process peak on that core is given too, as an upper
bound), and each job's
torch_peer.py result (samples/s, first step, accuracy, peak RSS). The environment of every peer
process pins its thread pools to one thread (OMP/OPENBLAS/MKL_NUM_THREADS=1); each process pins
itself to the core it is given (torch_peer.py --core, os.sched_setaffinity).
"""
import argparse
import json
import os
import selectors
import subprocess
import sys
import threading
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import workloads  # noqa: E402

PEER = os.path.join(HERE, "torch_peer.py")


class RssSampler:
    """Samples the summed RSS of a changing set of pids in a background thread."""

    def __init__(self, period=0.02):
        self.period = period
        self.pids = set()
        self.lock = threading.Lock()
        self.peak = 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def add(self, pid):
        with self.lock:
            self.pids.add(pid)

    def remove(self, pid):
        with self.lock:
            self.pids.discard(pid)

    def _run(self):
        procs = {}
        while not self.stop_flag.is_set():
            with self.lock:
                pids = set(self.pids)
            total = 0
            for pid in pids:
                try:
                    p = procs.get(pid) or procs.setdefault(pid, psutil.Process(pid))
                    total += p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    pass
            self.peak = max(self.peak, total)
            self.stop_flag.wait(self.period)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()


def peer_env():
    env = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[v] = "1"
    return env


def run_fresh(jobs, cores, peer_args, saves, timeout):
    """The recipe: one fresh pinned process per model, one per core at a time."""
    queue = list(jobs)
    running = {}  # core -> (Popen, job, spawn time)
    results = []
    env = peer_env()
    t0 = time.time()
    with RssSampler() as rss:
        while queue or running:
            for core in cores:
                if core not in running and queue:
                    job = queue.pop(0)
                    spawn = time.time()
                    cmd = [sys.executable, PEER, "--job", json.dumps(job), "--core", str(core),
                           "--launch-time", repr(spawn)] + peer_args
                    if job["name"] in saves:
                        cmd += ["--save", saves[job["name"]]]
                    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env)
                    rss.add(p.pid)
                    running[core] = (p, job, spawn)
            time.sleep(0.005)
            for core in list(running):
                p, job, spawn = running[core]
                if p.poll() is None:
                    if time.time() - spawn > timeout:
                        p.kill()
                    continue
                out, err = p.communicate()
                rss.remove(p.pid)
                del running[core]
                r = parse_result(out, err, p.returncode, job)
                r["core"] = core
                r["process_seconds"] = time.time() - spawn
                results.append(r)
    makespan = time.time() - t0
    return makespan, rss.peak, results


def run_pool(jobs, cores, peer_args, timeout):
    """Long-lived pinned workers fed longest job first."""
    env = peer_env()
    queue = list(jobs)
    results = []
    t0 = time.time()
    sel = selectors.DefaultSelector()
    workers = []
    with RssSampler() as rss:
        for core in cores:
            p = subprocess.Popen([sys.executable, PEER, "--serve", "--core", str(core)] + peer_args,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env)
            rss.add(p.pid)
            w = {"p": p, "core": core, "job": None}
            workers.append(w)
            sel.register(p.stdout, selectors.EVENT_READ, w)

        def feed(w):
            if queue:
                w["job"] = queue.pop(0)
                w["p"].stdin.write(json.dumps(w["job"]) + "\n")
                w["p"].stdin.flush()
            else:
                w["job"] = None
                w["p"].stdin.close()

        for w in workers:
            feed(w)
        busy = sum(1 for w in workers if w["job"])
        while busy:
            events = sel.select(timeout=timeout)
            if not events:
                raise RuntimeError(f"pooled peer: no answer for {timeout} s")
            for key, _ in events:
                w = key.data
                line = w["p"].stdout.readline()
                if not line:
                    raise RuntimeError(f"pooled peer worker on core {w['core']} exited "
                                       f"(code {w['p'].wait()}) during job {w['job']['name']}")
                r = json.loads(line)
                r["core"] = w["core"]
                results.append(r)
                feed(w)
                if w["job"] is None:
                    sel.unregister(w["p"].stdout)
                    busy -= 1
        for w in workers:
            w["p"].wait(timeout=60)
            rss.remove(w["p"].pid)
    makespan = time.time() - t0
    return makespan, rss.peak, results


def parse_result(out, err, code, job):
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        tail = "\n".join(err.strip().splitlines()[-5:])
        return {"name": job["name"], "ok": False,
                "error": f"torch_peer.py exited with code {code}: {tail}"}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", required=True, help="JSON file: a list of job specs")
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--mode", choices=["fresh", "pool"], required=True)
    ap.add_argument("--out", required=True, help="where to write the result JSON")
    ap.add_argument("--cores", help="comma-separated cores (default: the first N allowed)")
    ap.add_argument("--n-train", type=int, help="training samples, for the longest-first order")
    ap.add_argument("--peer-arg", action="append", default=[],
                    help="passed on to torch_peer.py (e.g. --peer-arg=--fmnist-dir=DIR)")
    ap.add_argument("--save-model", action="append", default=[], metavar="NAME=PATH",
                    help="fresh mode: torch_peer.py --save PATH for model NAME")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per model")
    a = ap.parse_args()
    with open(a.jobs) as f:
        jobs = json.load(f)
    allowed = sorted(os.sched_getaffinity(0))
    cores = [int(c) for c in a.cores.split(",")] if a.cores else allowed[:a.workers]
    if len(cores) != a.workers:
        sys.exit(f"torch_fleet: failed to pick {a.workers} cores; allowed cores are {allowed}")

    def n_train(job):
        if a.n_train:
            return a.n_train
        return workloads.W1_TRAIN if job["workload"] == "w1" else workloads.W3_TRAIN

    order = sorted(jobs, key=lambda j: -workloads.cost(j, n_train(j)))  # stable: plan order ties
    saves = dict(s.split("=", 1) for s in a.save_model)
    if a.mode == "fresh":
        makespan, peak, results = run_fresh(order, cores, a.peer_arg, saves, a.timeout)
    else:
        makespan, peak, results = run_pool(order, cores, a.peer_arg, a.timeout)
    failed = [r for r in results if not r.get("ok")]
    per_core = {}
    for r in results:
        per_core[r.get("core")] = max(per_core.get(r.get("core"), 0), r.get("peak_rss_bytes") or 0)
    out = {"mode": a.mode, "workers": a.workers, "cores": cores, "makespan_seconds": makespan,
           "peak_rss_sum_bytes": peak, "per_core_peak_sum_bytes": sum(per_core.values()),
           "models": results, "failed": len(failed)}
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, a.out)
    for r in failed:
        print(f"torch_fleet: model {r['name']} failed: {r.get('error')}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
