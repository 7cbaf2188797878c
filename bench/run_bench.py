#!/usr/bin/python3
"""nnfleet's benchmark: nnfleet against its peers on W1 to W5 (/work/shared/workloads.md), in
one sitting, interleaved, then the medians into BENCHMARKS.md (bench/bench_report.py writes it).

  bench/run_bench.py [--quick] [--rounds N] [--build DIR] [--nnfleet PATH] [--md PATH]
  make bench [ARGS=--quick]         (runs scripts/setup --bench, the build, bench/setup_peers.sh)

Scenarios, run in this order in every round, nnfleet first and then its peers:
  sgemm     single-thread sgemm 512^3 (OpenBLAS, torch.mm, numpy) and the core clock probe
  fma-probe the fp32 peak: bench/fma_probe.c pinned to each core, independent FMAs at each vector
            width the CPU has (128, 256, 512 bits), GFLOP/s and FLOP/cycle; the best core per
            width (the report's "% peak" divides by the best width's GFLOP/s)
  w1-1core  W1 on one core: `nnfleet train --workers 1`; the peer: a fresh pinned process per
            model, one at a time (per-model samples/s, launch to first step, the m7 for W2)
  w1-fleet  W1 on all cores: `nnfleet train --workers N`; the peer recipe with N processes
  w2        m7 predict + per-sample loss: nnfleet predict (b1, b256, b256 x N); PyTorch (b1, b32,
            b256, b256 x N processes); ONNX Runtime single-threaded (b1, b256)
  w3-1core  W3 on one core: nnfleet (for the scaling figure)
  w3-fleet  W3 on all cores: nnfleet; the peer recipe (fresh process per model); the pooled peer
  tiny-fleet  8,000 tiny models on all cores (bench/tiny_overhead.py's plan): nnfleet's overhead
            per model (wall time less the models' own training time shared by the workers); no
            peer
  w4-fleet  W4 on all cores: `nnfleet train examples/forecast.yaml` (per-architecture samples/s of
            each model on its one core, makespan, test MSE); until nnfleet has LSTM, GRU and
            Conv1D layers this step reports itself not available
  w5-search W5 on all cores: `nnfleet train examples/search/w5.yaml --workers N` (wall time for
            the trials, epochs trained, the best trial's validation and test accuracy); until
            nnfleet knows the plan's search keys this step reports itself not available
After the rounds, once:
  w5 nnfleet  the same plan with 1 worker (same study as with N?) and unpruned (its scheduler
            rewritten to `none`, the same max_epochs) on all cores
  w5 peer   Optuna + PyTorch (bench/peers/optuna_w5.py): N pinned workers sharing a journal-file
            study, then 1 worker (same study?); minutes on 2 cores
  w4 peer   W4's PyTorch peer (bench/peers/torch_w4.py) once, not in every round (about 12
            minutes on 2 cores): the three models of series 5 one after another on one core
            (single-core samples/s), then every model on the pooled peer (makespan, test MSE)
  many-models  bench/many_models.py's fleet of tiny models on digits (Dense 8, Dense 10, 1 epoch)
            at 1,000 and 100,000 models on all cores, default save policy: the wall time outside
            training, peak memory, bytes and files left (--quick: 200 and 2,000)
  w3-pack   bench/model/w3_pack_bench on one pinned core: W3's models alone against packs of 6
            and 60 whose first Dense layers run as one product, GFLOP/s over CPU time
  kernels   the kernel microbenchmarks (BUILD/bench/kernels/kernels_bench, Google Benchmark, W1's
            shapes) pinned to one core: samples/s and FLOP/s per kernel; on a CPU with AVX-512
            also kernels_bench_avx2 (the kernels built for AVX2, JITs held to AVX2), so the AVX2
            machines' path is measured too
  profiles  for each target missed, a short profile of its scenario (bench_probe.py: perf where
            `perf stat -e instructions` counts, else callgrind on a reduced run; massif for
            memory, or the memory map at the resident peak where valgrind cannot run the
            build): top symbols and their shares, into raw.json and the report

--quick keeps that structure on less work: W1 with m1, m3, m5 and m7 on the first 2,000 training
and 1,000 test images (IDX .gz subsets written to build/bench-data/fmnist-first2000-1000/), W3 on
8 of the 120 models for 3 epochs, W2 on those 2,000 images, W4 on 2 of the 32 series for 1
epoch, 800 tiny models, W5 with 9 trials (the peer on the first 2,000 training images, the next
500 and 2,000 test images); it writes
BUILD/bench/BENCHMARKS-quick.md, never BENCHMARKS.md.
Everything a round ran is logged under BUILD/bench/<mode>-<time>/ (logs/, profiles/, raw.json);
`bench/bench_report.py BUILD/bench/<mode>-<time>/raw.json` re-renders a run without measuring.
A full run replaces only its own machine kind's section of BENCHMARKS.md (CPU vendor, family and
model: bench_probe.machine_kind; bench_report.py merges).
"""
import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
sys.path.insert(0, HERE)
import bench_probe  # noqa: E402
import bench_report  # noqa: E402
import many_models  # noqa: E402
import tiny_overhead  # noqa: E402
import w5_bench  # noqa: E402
import workloads  # noqa: E402

PY = "/usr/bin/python3"
PEERS = os.path.join(HERE, "peers")
FMNIST = "/usr/share/datasets/fashion-mnist"
DATA = os.path.join(REPO, "build", "bench-data")  # examples/w3.yaml reads the digits from here
W4_DATA = os.path.join(DATA, "w4")  # and examples/forecast.yaml the series
W4_ARCHS = ("lstm", "gru", "tcn")
SYS_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
FMNIST_FILES = [("train-images-idx3-ubyte", 16, 784), ("train-labels-idx1-ubyte", 8, 1),
                ("t10k-images-idx3-ubyte", 16, 784), ("t10k-labels-idx1-ubyte", 8, 1)]
QUICK = {"w1_train": 2000, "w1_test": 1000, "w1_models": ["m1", "m3", "m5", "m7"],
         "w3_epochs": 3, "w2_b1": 300, "sgemm_seconds": 0.2, "clock_runs": 2,
         "kernels_min_time": 0.05, "profile_seconds": {"perf": 1, "valgrind": 0.005},
         "profile_max": 2,
         "w3_grid": {"width": [16, 128], "act": ["relu"], "lr": [0.003], "bs": [16, 32]},
         "w4_series": 2, "w4_epochs": 1, "tiny_models": 800,
         "many_models": [200, 2000], "w3_pack": {"epochs": 1, "rounds": 1, "packs": [6, 60]},
         "w5_trials": 9, "w5_peer": {"trials": 9, "train": 2000, "val": 500, "test": 2000}}
FULL = {"w1_train": None, "w1_test": None, "w1_models": list(workloads.W1_MODELS),
        "w3_epochs": workloads.W3_EPOCHS, "w2_b1": 10000, "sgemm_seconds": 0.5, "clock_runs": 5,
        "kernels_min_time": 0.2, "profile_seconds": {"perf": 5, "valgrind": 0.02},
        "profile_max": None,
        "w3_grid": workloads.W3_GRID, "w4_series": 32, "w4_epochs": 10, "tiny_models": 8000,
        "many_models": [1000, 100000], "w3_pack": {"epochs": 10, "rounds": 3, "packs": [6, 60]},
        "w5_trials": None,  # the plan's own (81)
        "w5_peer": {"trials": workloads.W5_TRIALS, "train": workloads.W5_TRAIN,
                    "val": workloads.W5_VAL, "test": workloads.W5_TEST}}


class BenchError(Exception):
    """A step failed; the message names what and where its log is."""


class NotAvailable(Exception):
    """A figure this nnfleet (or this machine) cannot produce yet; reported as missing."""


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def shown(cmd):
    """A command as a shell line, paths inside the repository made relative to it."""
    out = []
    for c in cmd:
        c = str(c)
        if c.startswith(REPO + "/"):
            c = os.path.relpath(c, REPO)
        out.append(shlex.quote(c))
    return " ".join(out)


def child_env(extra):
    """os.environ with `extra` applied: a value of None removes that variable."""
    env = dict(os.environ)
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def shown_env(extra):
    """`extra` as a shell prefix: `env -u K` for removed variables, then K=V."""
    unset = [k for k, v in (extra or {}).items() if v is None]
    pre = "env " + " ".join(f"-u {k}" for k in unset) + " " if unset else ""
    return (pre + " ".join(f"{k}={shlex.quote(v)}" for k, v in (extra or {}).items()
                           if v is not None)).strip()


class Bench:
    def __init__(self, a):
        self.a = a
        self.cfg = QUICK if a.quick else FULL
        self.mode = "quick" if a.quick else "full"
        self.build = os.path.abspath(os.path.join(REPO, a.build))
        self.nnfleet = os.path.abspath(a.nnfleet or os.path.join(self.build, "nnfleet"))
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.work = os.path.join(self.build, "bench", f"{self.mode}-{stamp}")
        self.md = a.md or (os.path.join(self.build, "bench", "BENCHMARKS-quick.md") if a.quick
                           else os.path.join(REPO, "BENCHMARKS.md"))
        if a.quick and bench_report.is_benchmarks_md(self.md):
            raise BenchError(f"failed to accept --md {a.md}: a --quick run never writes "
                             "BENCHMARKS.md; expected another path, got BENCHMARKS.md")
        self.cores = sorted(os.sched_getaffinity(0))
        self.n = len(self.cores)
        self.values = {}       # figure key -> [value per round]
        self.info = {}         # key -> text (versions, best configurations, ...)
        self.unavailable = {}  # step -> reason
        self.failures = []     # (round, step, message)
        self.commands = {}     # label -> shell line (first time it ran)
        self.round = 0
        self.loads = []        # (round, load average before, after)
        self.kernels = None    # [{name, samples_per_second, flops_per_second}] (kernels_bench)
        self.kernels_core = None  # the core it ran on
        self.kernels_avx2 = None  # the same from kernels_bench_avx2 (AVX-512 machines only)
        self.profiles = {}     # scenario -> {tool, command, reduced, top, ...} (bench_probe)

    # ---- recording ----------------------------------------------------------------------------
    def add(self, key, value):
        if value is not None:
            self.values.setdefault(key, []).append(float(value))

    def step(self, name, fn):
        t = time.time()
        print(f"[{self.mode} round {self.round}/{self.a.rounds}] {name} ...", flush=True)
        try:
            fn()
            status = "ok"
        except NotAvailable as e:
            self.unavailable.setdefault(name, str(e))
            status = f"not available: {e}"
        except BenchError as e:
            self.failures.append((self.round, name, str(e)))
            status = f"FAILED: {e}"
        except Exception as e:  # a harness bug: keep going, say where
            tb = traceback.format_exc()
            log = os.path.join(self.work, "logs", f"r{self.round}-{name}-traceback.log")
            write_atomic(log, tb)
            self.failures.append((self.round, name, f"{type(e).__name__}: {e} (traceback: {log})"))
            status = f"FAILED: {type(e).__name__}: {e}"
        print(f"    {status} ({time.time() - t:.1f} s)", flush=True)

    # ---- running commands ---------------------------------------------------------------------
    def log_path(self, label):
        return os.path.join(self.work, "logs", f"r{self.round}-{label}.log")

    def run(self, label, cmd, env_extra=None, timeout=7200):
        env = child_env(env_extra)
        pre = shown_env(env_extra)
        self.commands.setdefault(label, (pre + " " if pre else "") + shown(cmd))
        t0 = time.time()
        try:
            p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                               timeout=timeout, cwd=REPO)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{label}: `{shown(cmd)}` did not finish in {timeout} s")
        except OSError as e:
            raise BenchError(f"{label}: failed to start `{shown(cmd)}`: {e}")
        wall = time.time() - t0
        log = self.log_path(label)
        write_atomic(log, f"$ {shown(cmd)}\nexit code {p.returncode}, {wall:.3f} s\n"
                          f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
        if p.returncode != 0:
            tail = " | ".join(p.stderr.strip().splitlines()[-3:])
            raise BenchError(f"{label}: `{shown(cmd)}` exited with code {p.returncode}: {tail} "
                             f"(log: {log})")
        return p, wall

    def peer_env(self):
        # One thread each; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines for old
        # OpenBLAS builds) would hold the peer's BLAS to a named core such as Haswell while nnfleet
        # uses what the CPU has, so the peers run with both unset (None: removed); the
        # peer-kernels probe records the kernels OpenBLAS and oneDNN then choose.
        env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None}
        if self.openblas:
            env["LD_LIBRARY_PATH"] = self.openblas + (
                ":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
        return env

    def nnfleet_train(self, label, plan, workers, out, ok=("done",)):
        """Runs `nnfleet train --json`, timestamping each event line as it arrives; every model
        must end in a status of `ok`."""
        cmd = [self.nnfleet, "train", plan, "--workers", str(workers), "--json", "--out", out]
        self.commands.setdefault(label, shown(cmd))
        log = self.log_path(label)
        lines, err = [], []
        spawn = time.time()
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 bufsize=1, cwd=REPO)
        except OSError as e:
            raise BenchError(f"{label}: failed to start `{shown(cmd)}`: {e}")
        drain = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
        drain.start()
        first_start = run_end = end_at = None
        for line in p.stdout:
            t = time.time() - spawn
            lines.append(f"{t:.4f} {line.rstrip()}")
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            # nnfleet reports its first completed training step; older builds only "start".
            if ev.get("event") == "first_step" or (ev.get("event") == "start" and first_start is None):
                first_start = t
            if ev.get("event") == "run_end":
                run_end, end_at = ev, t
        rc = p.wait()
        drain.join()
        wall = time.time() - spawn
        write_atomic(log, f"$ {shown(cmd)}\nexit code {rc}, {wall:.3f} s\n"
                          "--- stdout (seconds since spawn, line)\n" + "\n".join(lines)
                          + f"\n--- stderr\n{''.join(err)}")
        if rc != 0 or run_end is None:
            tail = " | ".join("".join(err).strip().splitlines()[-3:])
            raise BenchError(f"{label}: `{shown(cmd)}` exited with code {rc}: {tail} (log: {log})")
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
        bad = [f"{m['name']} ({m['status']}: {m.get('message')})" for m in res["models"]
               if m["status"] not in ok]
        if bad:
            raise BenchError(f"{label}: models did not finish: {', '.join(bad)} (log: {log})")
        return {"first_start": first_start, "wall_to_run_end": end_at, "wall": wall,
                "run_end": run_end, "models": {m["name"]: m for m in res["models"]},
                "results": res}

    def peer_fleet(self, label, jobs, workers, mode, cores=None, save=None, n_train=None):
        jobs_file = os.path.join(self.work, f"jobs-{label}.json")
        write_atomic(jobs_file, json.dumps(jobs))
        out = os.path.join(self.work, f"r{self.round}-{label}.json")
        cmd = [PY, os.path.join(PEERS, "torch_fleet.py"), "--jobs", jobs_file, "--workers",
               workers, "--mode", mode, "--out", out, f"--peer-arg=--fmnist-dir={self.fmnist_dir}",
               f"--peer-arg=--digits-dir={DATA}"]
        if cores:
            cmd += ["--cores", ",".join(map(str, cores))]
        if n_train:
            cmd += ["--n-train", n_train]
        for name, path in (save or {}).items():
            cmd += ["--save-model", f"{name}={path}"]
        self.run(label, cmd, self.peer_env())
        with open(out) as f:
            r = json.load(f)
        r["by_name"] = {m["name"]: m for m in r["models"]}
        return r

    # ---- set-up -------------------------------------------------------------------------------
    def preflight(self):
        os.makedirs(os.path.join(self.work, "logs"), exist_ok=True)
        # Built first: machine() asks it for cpuid's caches where the VM hides them from lscpu.
        self.fma_exe = os.path.join(self.work, "fma_probe")
        self.run("fma-probe-build", ["cc", "-O2", "-o", self.fma_exe,
                                     os.path.join(HERE, "fma_probe.c")])
        self.machine = bench_probe.machine(REPO, self.cores, self.fma_exe)
        if not os.access(self.nnfleet, os.X_OK):
            raise BenchError(f"failed to find nnfleet at {self.nnfleet}; expected a built tool "
                             "(make build), or pass --nnfleet PATH")
        for stem, _, _ in FMNIST_FILES:
            if not os.path.exists(os.path.join(FMNIST, stem + ".gz")):
                raise BenchError(f"failed to find Fashion-MNIST: {FMNIST}/{stem}.gz is missing; "
                                 "expected Debian's dataset-fashion-mnist (scripts/setup)")
        try:
            subprocess.run([PY, "-c", "import torch, numpy, psutil, sklearn"], check=True,
                           capture_output=True, text=True)
        except subprocess.CalledProcessError as e:
            raise BenchError("failed to import the peers' Python packages (torch, numpy, psutil, "
                             f"sklearn): {e.stderr.strip().splitlines()[-1]}; expected "
                             "`scripts/setup --bench` to have installed them")
        self.run("digits-data", [PY, os.path.join(REPO, "tools", "make_digits_data.py"), DATA])
        self.run("w4-data", [PY, os.path.join(REPO, "tools", "make_w4_series.py"), W4_DATA])
        unpacked = os.path.join(self.build, "bench-deps", "openblas", SYS_OPENBLAS[1:])
        for d in (SYS_OPENBLAS, unpacked):
            if os.path.exists(os.path.join(d, "libblas.so.3")):
                self.openblas = d
                break
        else:
            self.openblas = None
            self.failures.append((0, "setup", "OpenBLAS not found (bench/setup_peers.sh " +
                                  self.a.build + " unpacks it); the PyTorch peer runs on the "
                                  "machine's libblas.so.3, which BENCHMARKS.md names"))
        self.node_path = os.path.join(self.build, "bench-node", "node_modules")
        if not os.path.exists(os.path.join(self.node_path, "onnxruntime-node", "package.json")):
            self.node_path = None
        self.clock_probe = os.path.join(self.work, "clock_probe")
        self.run("clock-probe-build", ["cc", "-O2", "-o", self.clock_probe,
                                       os.path.join(HERE, "clock_probe.c")])
        self.version = self.run("nnfleet-version", [self.nnfleet, "--version"])[0].stdout.strip()
        helptext = subprocess.run([self.nnfleet, "--help"], capture_output=True, text=True).stdout
        self.has_predict = re.search(r"^\s+predict\s", helptext, re.M) is not None
        if self.a.quick:
            self.fmnist_dir = os.path.join(
                DATA, f"fmnist-first{self.cfg['w1_train']}-{self.cfg['w1_test']}")
            write_idx_subset(self.fmnist_dir, self.cfg["w1_train"], self.cfg["w1_test"])
        else:
            self.fmnist_dir = FMNIST
        self.b1_dir = os.path.join(DATA, f"fmnist-first{self.cfg['w2_b1']}")
        write_idx_subset(self.b1_dir, self.cfg["w2_b1"], 1)
        self.plans = self.make_plans()
        self.w1_models = self.cfg["w1_models"]
        self.w1_jobs = [workloads.w1_spec(m) for m in self.w1_models]
        self.w3_jobs = workloads.w3_specs(grid=self.cfg["w3_grid"], epochs=self.cfg["w3_epochs"])
        self.n_train = self.cfg["w1_train"] or workloads.W1_TRAIN
        self.n_test = self.cfg["w1_test"] or workloads.W1_TEST

    def make_plans(self):
        """Full: examples/w1.yaml, w3.yaml and forecast.yaml as they are. Quick: the same text
        with fewer series and epochs for W4, and for W1 and W3 with the data
        set, models, epochs and grid swapped, written into the work folder."""
        if not self.a.quick:
            return {"w1": os.path.join(REPO, "examples", "w1.yaml"),
                    "w3": os.path.join(REPO, "examples", "w3.yaml"),
                    "w4": os.path.join(REPO, "examples", "forecast.yaml")}
        return {"w1": self.w1_plan(self.cfg["w1_models"], self.fmnist_dir, "w1-quick"),
                "w3": self.w3_plan(self.cfg["w3_grid"], self.cfg["w3_epochs"], "w3-quick"),
                "w4": self.w4_plan(self.cfg["w4_series"], self.cfg["w4_epochs"], "w4-quick")}

    def w1_plan(self, models, data_dir, name):
        """examples/w1.yaml with only `models`, reading the IDX .gz files of data_dir."""
        w1 = os.path.join(REPO, "examples", "w1.yaml")
        text = read(w1)
        for part, stem in (("train", "train"), ("test", "t10k")):
            text = must_sub(text, f"{part}: fashion-mnist:{part}",
                            f"{part}: {{idx_images: {data_dir}/{stem}-images-idx3-ubyte.gz, "
                            f"idx_labels: {data_dir}/{stem}-labels-idx1-ubyte.gz}}", 1, w1)
        text = keep_models(text, models, w1)
        out = os.path.join(self.work, f"{name}.yaml")
        write_atomic(out, f"# examples/w1.yaml on {', '.join(models)} and {data_dir}, "
                          "for bench/run_bench.py\n" + text)
        return out

    def w1_subset_plan(self, models, n_train, n_test, name):
        """w1_plan on the first n_train training and n_test test images."""
        d = os.path.join(DATA, f"fmnist-first{n_train}-{n_test}")
        write_idx_subset(d, n_train, n_test)
        return self.w1_plan(models, d, name)

    def w3_plan(self, grid, epochs, name):
        """examples/w3.yaml with its grid and epochs swapped."""
        w3 = os.path.join(REPO, "examples", "w3.yaml")
        g = workloads.W3_GRID

        def grid_text(q):
            return (f"grid: {{width: {list(q['width'])}, act: [{', '.join(q['act'])}], "
                    f"lr: {list(q['lr'])}, bs: {list(q['bs'])}}}")
        text = must_sub(read(w3), grid_text(g), grid_text(grid), 2, w3)
        text = must_sub(text, f"epochs: {workloads.W3_EPOCHS}", f"epochs: {epochs}", 1, w3)
        text = must_sub(text, "../build/bench-data/", DATA + "/", 4, w3)
        out = os.path.join(self.work, f"{name}.yaml")
        write_atomic(out, "# examples/w3.yaml reduced, for bench/run_bench.py\n" + text)
        return out

    # ---- scenarios ----------------------------------------------------------------------------
    def w4_plan(self, series, epochs, name):
        """examples/forecast.yaml on series 0..series-1 for `epochs` epochs."""
        path = os.path.join(REPO, "examples", "forecast.yaml")
        text = read(path)
        grids = re.findall(r"k: \[[^\]]*\]", text)
        if len(grids) != len(W4_ARCHS):
            raise BenchError(f"failed to derive the W4 plan from {path}: expected "
                             f"{len(W4_ARCHS)} grids 'k: [...]', got {len(grids)}")
        keep = "k: [" + ", ".join(f'"{k:02d}"' for k in range(series)) + "]"
        for g in set(grids):
            text = text.replace(g, keep)
        text = must_sub(text, f"epochs: {workloads.W4_EPOCHS}", f"epochs: {epochs}", 1, path)
        text = must_sub(text, "../build/bench-data/", DATA + "/", 4, path)
        out = os.path.join(self.work, f"{name}.yaml")
        write_atomic(out, "# examples/forecast.yaml reduced, for bench/run_bench.py\n" + text)
        return out

    def peer_kernels(self):
        """Once per run: the OpenBLAS core and the oneDNN convolution kernels the peer runs."""
        p, _ = self.run("peer-kernels", [PY, os.path.join(PEERS, "peer_kernels.py"), "--core",
                                         self.cores[0]], self.peer_env())
        r = json.loads(p.stdout)
        blas = [f"OpenBLAS {q['version']} kernel {q['architecture']}" for q in r["pools"]
                if q.get("internal_api") == "openblas"]
        self.info["peer_kernels"] = "; ".join(
            (blas or ["no OpenBLAS in the peer (threadpoolctl)"])
            + ["oneDNN (PyTorch's MKL-DNN) " + (", ".join(r["onednn"]) or "not used")])

    def sgemm(self):
        cmd = [PY, os.path.join(HERE, "sgemm_rate.py"), "--core", self.cores[0],
               "--seconds", self.cfg["sgemm_seconds"]]
        if self.openblas:
            cmd += ["--openblas", self.openblas]
        r = json.loads(self.run("sgemm", cmd, self.peer_env())[0].stdout)
        if r["openblas"]:
            self.add("sgemm.openblas", r["openblas"]["gflops"])
            self.info["openblas"] = f"{r['openblas']['library']} (kernel {r['openblas']['core']})"
        self.add("sgemm.torch", r["torch"]["gflops"])
        self.add("sgemm.numpy", r["numpy"]["gflops"])
        self.info["peer_blas"] = ", ".join(r["blas_loaded"]) or "none found"
        if "peer_kernels" not in self.info:
            self.peer_kernels()
        self.info["torch"] = r["torch"]["version"]
        self.info["numpy"] = r["numpy"]["version"]
        mhz = []
        for c in self.cores:
            p, _ = self.run(f"clock-core{c}", ["taskset", "-c", c, self.clock_probe,
                                              self.cfg["clock_runs"]])
            mhz.append(float(p.stdout))
        self.add("clock.probe_mhz", max(mhz))

    def fma_probe(self):
        """The fp32 peak (bench/fma_probe.c) pinned to each core: per vector width the best core's
        GFLOP/s, FLOP/cycle and the clock the probe measured; the report's peak is the best
        width's GFLOP/s (fma.gflops.<bits>)."""
        best = {}
        for c in self.cores:
            p, _ = self.run(f"fma-probe-core{c}", ["taskset", "-c", c, self.fma_exe,
                                                  self.cfg["clock_runs"]])
            try:
                r = bench_probe.parse_fma_probe(p.stdout)
            except ValueError as e:
                raise BenchError(f"fma-probe: {e} (log: {self.log_path(f'fma-probe-core{c}')})")
            for w in r["widths"]:
                if w["gflops"] > best.get(w["bits"], {}).get("gflops", 0):
                    best[w["bits"]] = dict(w, clock_mhz=r["clock_mhz"])
        for bits, w in sorted(best.items()):
            self.add(f"fma.gflops.{bits}", w["gflops"])
            self.add(f"fma.flop_per_cycle.{bits}", w["flop_per_cycle"])
            self.add(f"fma.clock_mhz.{bits}", w["clock_mhz"])
            self.info[f"fma.isa.{bits}"] = f"{w['isa']}, {w['chains']} chains"

    def w1_1core(self):
        out = os.path.join(self.work, f"r{self.round}-w1-1core")
        r = self.nnfleet_train("nnfleet-w1-1core", self.plans["w1"], 1, out)
        self.w1_out = out
        for name, m in r["models"].items():
            self.add(f"w1.sps.{name}.nnfleet", m["samples_per_second"])
            self.add(f"w1.acc.{name}.nnfleet", m["metrics"].get("test_accuracy"))
            self.info[f"params.{name}.nnfleet"] = m["params"]
        self.add("w1.launch.nnfleet", r["first_start"])
        self.add("w1.wall1.nnfleet", r["wall_to_run_end"])
        self.add("w1.rss1.nnfleet", r["run_end"]["peak_rss_bytes"])

    def w1_1core_peer(self):
        r = self.peer_fleet("peer-w1-1core", self.w1_jobs, 1, "fresh", cores=self.cores[:1],
                            save={"m7": os.path.join(self.work, "peer_m7.pt")},
                            n_train=self.n_train)
        for name, m in r["by_name"].items():
            self.add(f"w1.sps.{name}.peer", m.get("samples_per_second"))
            self.add(f"w1.acc.{name}.peer", m.get("test_accuracy"))
            self.values.setdefault("w1.launch.peer.all", []).append(m.get("first_step_seconds"))
            self.info[f"params.{name}.peer"] = m.get("params")
        self.add("w1.launch.peer", median([m["first_step_seconds"] for m in r["models"]]))
        self.add("w1.wall1.peer", r["makespan_seconds"])
        self.check_same_models("W1", self.w1_models)

    def check_same_models(self, what, names):
        diff = [f"{n} (nnfleet {self.info.get(f'params.{n}.nnfleet')}, peer "
                f"{self.info.get(f'params.{n}.peer')})" for n in names
                if self.info.get(f"params.{n}.nnfleet") != self.info.get(f"params.{n}.peer")
                and f"params.{n}.nnfleet" in self.info and f"params.{n}.peer" in self.info]
        if diff:
            raise BenchError(f"{what}: nnfleet and the peer trained different models (parameter "
                             f"counts differ): {', '.join(diff)}")

    def w1_fleet(self):
        out = os.path.join(self.work, f"r{self.round}-w1-fleet")
        r = self.nnfleet_train("nnfleet-w1-fleet", self.plans["w1"], self.n, out)
        self.add("w1.wall.nnfleet", r["wall_to_run_end"])
        self.add("w1.makespan_internal.nnfleet", r["run_end"]["makespan_seconds"])
        self.add("w1.rss.nnfleet", r["run_end"]["peak_rss_bytes"])
        self.add("w1.launch.nnfleet", r["first_start"])
        self.add("w1.m7.nnfleet", r["models"]["m7"]["seconds"])
        self.add("w1.m7share.nnfleet", r["models"]["m7"]["seconds"] / r["wall_to_run_end"])
        for name, m in r["models"].items():
            self.add(f"w1.fleet_acc.{name}.nnfleet", m["metrics"].get("test_accuracy"))

    def w1_fleet_peer(self):
        r = self.peer_fleet("peer-w1-fleet", self.w1_jobs, self.n, "fresh", n_train=self.n_train)
        self.add("w1.wall.peer", r["makespan_seconds"])
        self.add("w1.rss.peer", r["peak_rss_sum_bytes"])
        self.add("w1.rss_bound.peer", r["per_core_peak_sum_bytes"])
        m7 = r["by_name"]["m7"]
        self.add("w1.m7.peer", m7["process_seconds"])
        self.add("w1.m7share.peer", m7["process_seconds"] / r["makespan_seconds"])

    def w2_nnfleet(self):
        if not self.has_predict:
            raise NotAvailable(f"{shown([self.nnfleet])} has no `predict` command")
        models = os.path.join(getattr(self, "w1_out", ""), "models")
        found = sorted(f for f in (os.listdir(models) if os.path.isdir(models) else [])
                       if f.startswith("m7.") or f == "m7")
        if not found:
            raise NotAvailable(f"nnfleet train wrote no m7 model file into {models} (the Keras "
                               "writer is not wired into `train` in this build)")
        model = os.path.join(models, "m7.keras" if "m7.keras" in found else found[0])
        full = (os.path.join(self.fmnist_dir, "train-images-idx3-ubyte.gz"),
                os.path.join(self.fmnist_dir, "train-labels-idx1-ubyte.gz"))
        first = (os.path.join(self.b1_dir, "train-images-idx3-ubyte.gz"),
                 os.path.join(self.b1_dir, "train-labels-idx1-ubyte.gz"))
        for label, (x, y), batch, workers in [("b1", first, 1, 1), ("b256", full, 256, 1),
                                              ("b256-all", full, 256, self.n)]:
            pred = os.path.join(self.work, f"r{self.round}-nnfleet-pred-{label}.npy")
            cmd = [self.nnfleet, "predict", model, "--x", x, "--y", y, "--scale",
                   repr(1 / 255), "--loss", "sparse_categorical_crossentropy", "--batch", batch,
                   "--workers", workers, "--out", pred]
            p, _ = self.run(f"nnfleet-w2-{label}", cmd)
            m = re.search(r"([0-9.]+) samples/s.*model loaded in ([0-9.]+) s", p.stderr)
            if not m:
                raise BenchError(f"nnfleet-w2-{label}: no 'N samples/s ... model loaded in S s' "
                                 f"line on stderr (log: {self.log_path('nnfleet-w2-' + label)})")
            self.add(f"w2.{label}.nnfleet", float(m.group(1)))
            if label == "b256":
                self.add("w2.load.nnfleet", float(m.group(2)))

    def w2_torch(self):
        state = os.path.join(self.work, "peer_m7.pt")
        if not os.path.exists(state):
            raise BenchError(f"the peer's m7 ({state}) is missing: the W1 one-core peer run "
                             "failed before it")
        script = os.path.join(PEERS, "torch_predict.py")
        p, _ = self.run("peer-w2-torch", [PY, script, "--state", state, "--core", self.cores[0],
                                          "--batch", "1,32,256", "--limit",
                                          f"1={self.cfg['w2_b1']}", "--fmnist-dir",
                                          self.fmnist_dir], self.peer_env())
        r = json.loads(p.stdout)
        for b in ("1", "32", "256"):
            self.add(f"w2.torch_b{b}.peer", r["batches"][b]["samples_per_second"])
        self.add("w2.b1.peer", r["batches"]["1"]["samples_per_second"])
        best = max(("1", "32", "256"), key=lambda b: r["batches"][b]["samples_per_second"])
        self.add("w2.best.peer", r["batches"][best]["samples_per_second"])
        self.values.setdefault("w2.best_batch.peer", []).append(int(best))
        self.add("w2.load.peer", r["load_seconds"])
        self.info["w2.torch_loss"] = r["batches"]["256"]["mean_loss"]
        # All cores: one process per core, each on its share of the images.
        env = child_env(self.peer_env())
        cmds = [[PY, script, "--state", state, "--core", str(c), "--batch", "256", "--shard",
                 f"{i}/{self.n}", "--fmnist-dir", self.fmnist_dir]
                for i, c in enumerate(self.cores)]
        pre = shown_env(self.peer_env())
        self.commands.setdefault("peer-w2-torch-allcores",
                                 " & ".join(f"{pre} {shown(c)}" for c in cmds) + "; wait")
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env, cwd=REPO) for c in cmds]
        outs = [p.communicate(timeout=7200) for p in procs]
        for p, (o, e) in zip(procs, outs):
            if p.returncode != 0:
                raise BenchError(f"peer-w2-torch-allcores: torch_predict.py exited with code "
                                 f"{p.returncode}: {e.strip().splitlines()[-1:]}")
        shards = [json.loads(o)["batches"]["256"] for o, _ in outs]
        self.add("w2.b256-all.peer",
                 sum(s["samples"] for s in shards) / max(s["seconds"] for s in shards))

    def w2_ort(self):
        if not self.node_path:
            raise BenchError("onnxruntime-node is not installed under "
                             f"{os.path.join(self.build, 'bench-node')} (bench/setup_peers.sh "
                             f"{self.a.build} installs it)")
        state = os.path.join(self.work, "peer_m7.pt")
        onnx = os.path.join(self.work, "m7.onnx")
        if not os.path.exists(onnx):
            if not os.path.exists(state):
                raise BenchError(f"the peer's m7 ({state}) is missing: the W1 one-core peer run "
                                 "failed before it")
            self.run("export-onnx", [PY, os.path.join(PEERS, "export_m7_onnx.py"), "--state",
                                     state, "--out", onnx], self.peer_env())
        p, _ = self.run("peer-w2-ort", ["taskset", "-c", self.cores[0], "node",
                                        os.path.join(PEERS, "ort_predict.js"), "--model", onnx,
                                        "--batch", "1,256", "--limit", f"1={self.cfg['w2_b1']}",
                                        "--fmnist-dir", self.fmnist_dir],
                        {"NODE_PATH": self.node_path})
        r = json.loads(p.stdout)
        self.add("w2.b1.ort", r["batches"]["1"]["samples_per_second"])
        self.add("w2.b256.ort", r["batches"]["256"]["samples_per_second"])
        self.add("w2.load.ort", r["load_seconds"])
        self.info["ort"] = r["version"].get("node", "?")
        self.info["w2.ort_loss"] = r["batches"]["256"]["mean_loss"]

    def w3_1core(self):
        out = os.path.join(self.work, f"r{self.round}-w3-1core")
        r = self.nnfleet_train("nnfleet-w3-1core", self.plans["w3"], 1, out)
        self.add("w3.wall1.nnfleet", r["wall_to_run_end"])

    def w3_fleet(self):
        out = os.path.join(self.work, f"r{self.round}-w3-fleet")
        r = self.nnfleet_train("nnfleet-w3-fleet", self.plans["w3"], self.n, out)
        self.add("w3.wall.nnfleet", r["wall_to_run_end"])
        self.add("w3.rss.nnfleet", r["run_end"]["peak_rss_bytes"])
        ms = r["models"]
        self.w3_names = set(ms)
        self.add("w3.mean_model.nnfleet", sum(m["seconds"] for m in ms.values()) / len(ms))
        best = max(ms.values(), key=lambda m: m["metrics"].get("test_accuracy", -1))
        self.add("w3.best_acc.nnfleet", best["metrics"]["test_accuracy"])
        self.info.setdefault("w3.best.nnfleet", []).append(best["name"])
        for name, m in ms.items():
            self.info[f"params.{name}.nnfleet"] = m["params"]

    def w3_fleet_peer(self, mode):
        r = self.peer_fleet(f"peer-w3-{mode}", self.w3_jobs, self.n, mode)
        self.add(f"w3.wall.{mode}", r["makespan_seconds"])
        self.add(f"w3.rss.{mode}", r["peak_rss_sum_bytes"])
        ms = r["models"]
        if mode == "fresh":
            self.add("w3.mean_model.fresh", sum(m["process_seconds"] for m in ms) / len(ms))
        self.add(f"w3.mean_train.{mode}", sum(m["train_seconds"] for m in ms) / len(ms))
        best = max(ms, key=lambda m: m["test_accuracy"])
        self.add(f"w3.best_acc.{mode}", best["test_accuracy"])
        self.info.setdefault(f"w3.best.{mode}", []).append(best["name"])
        for m in ms:
            self.info[f"params.{m['name']}.peer"] = m["params"]
        names = {j["name"] for j in self.w3_jobs}
        if getattr(self, "w3_names", None) and self.w3_names != names:
            raise BenchError("W3: nnfleet's plan and the peer's grid name different models: only "
                             f"nnfleet {sorted(self.w3_names - names)[:5]}, only the peer "
                             f"{sorted(names - self.w3_names)[:5]}")
        self.check_same_models("W3", sorted(names))

    def tiny(self):
        """Issue 10's figure: the overhead per model of a fleet of tiny models
        (bench/tiny_overhead.py's plan and figure), on all cores."""
        n = self.cfg["tiny_models"]
        plan = tiny_overhead.write_inputs(os.path.join(self.work, "tiny"), n)
        out = os.path.join(self.work, f"r{self.round}-tiny")
        subprocess.run(["sync"], check=True)  # not the writeback of the runs before
        start = time.time()
        self.run("nnfleet-tiny", tiny_overhead.command(self.nnfleet, plan, out, self.n))
        r = tiny_overhead.phases(out, start, time.time(), self.n, n)
        self.add("tiny.overhead.nnfleet", r["overhead_ms"] / 1e3)
        self.tiny_plan = plan

    def many_models(self):
        """Issue 36's figure: a fleet of tiny models on digits (bench/many_models.py), once at the
        small and once at the large count, with the default save policy: the fraction of the wall
        time outside training, peak resident memory, and what the run left on disk."""
        folder = os.path.join(self.work, "many")
        os.makedirs(folder, exist_ok=True)
        many_models.write_data(folder)
        for n in self.cfg["many_models"]:
            plan = os.path.join(folder, f"many{n}.yaml")
            with open(plan, "w") as f:
                f.write(many_models.plan_text(n))
            args = argparse.Namespace(nnfleet=self.nnfleet, workers=self.n, save="")
            out = os.path.join(folder, f"out{n}")
            self.commands[f"many-models-{n}"] = shlex.join(
                ["/usr/bin/python3", "bench/many_models.py", "--nnfleet", self.nnfleet,
                 "--models", str(n), "--workers", str(self.n)])
            try:
                r = many_models.one_run(args, plan, out)
            except SystemExit as e:
                raise BenchError(f"many-models {n}: {e}")
            shutil.rmtree(out, ignore_errors=True)
            for key in ("wall_s", "train_sum_s", "outside_training", "peak_rss_mb",
                        "bytes_written", "files_written"):
                self.add(f"many.{n}.{key}", r[key])

    def w3_pack(self):
        """W3's models trained one at a time against packed (bench/model/w3_pack_bench, one
        pinned thread): GFLOP/s over CPU time per batch size and path."""
        exe = os.path.join(self.build, "bench", "model", "w3_pack_bench")
        if not os.access(exe, os.X_OK):
            raise NotAvailable(f"{shown([exe])} is not built (the build's NNFLEET_BENCH option "
                               "builds it)")
        cfg = self.cfg["w3_pack"]
        cmd = ["taskset", "-c", str(self.cores[-1]), exe, "--epochs", str(cfg["epochs"]),
               "--rounds", str(cfg["rounds"])]
        for k in cfg["packs"]:
            cmd += ["--pack", str(k)]
        p, _ = self.run("w3-pack", cmd)
        for line in p.stdout.splitlines():
            m = re.match(r"\s*(\d+)\s+(alone|pack \d+)\s+([\d.]+)\s+([\d.]+)", line)
            if m:
                path = m.group(2).replace(" ", "")
                self.add(f"w3pack.cpu.{m.group(1)}.{path}", float(m.group(3)))
                self.add(f"w3pack.wall.{m.group(1)}.{path}", float(m.group(4)))
        if not any(k.startswith("w3pack.") for k in self.values):
            raise BenchError(f"w3-pack: no rows on stdout (log: {self.log_path('w3-pack')})")

    def w4_fleet(self):
        out = os.path.join(self.work, f"r{self.round}-w4-fleet")
        try:
            r = self.nnfleet_train("nnfleet-w4-fleet", self.plans["w4"], self.n, out)
        except BenchError as e:
            missing = sorted(set(re.findall(r"unknown layer class '(\w+)'",
                                            read(self.log_path("nnfleet-w4-fleet")))))
            if missing:
                raise NotAvailable(f"this nnfleet has no {', '.join(missing)} layer (the plan "
                                   f"{shown([self.plans['w4']])} needs them)") from e
            raise
        self.add("w4.wall.nnfleet", r["wall_to_run_end"])
        self.add("w4.rss.nnfleet", r["run_end"]["peak_rss_bytes"])
        for arch in W4_ARCHS:
            ms = [m for name, m in r["models"].items() if name.startswith(arch + "-")]
            if not ms:
                raise BenchError(f"W4: no {arch}-<k> model in {out}/results.json")
            self.add(f"w4.sps.{arch}.nnfleet",
                     sum(m["samples_per_second"] for m in ms) / len(ms))
            self.add(f"w4.mse.{arch}.nnfleet",
                     sum(m["metrics"]["test_loss"] for m in ms) / len(ms))

    def w4_peer(self):
        """Once per run: the pooled peer's makespan and MSE, and the single-core rates."""
        env = self.peer_env()
        peer = os.path.join(PEERS, "torch_w4.py")
        single = os.path.join(self.work, "peer-w4-single.json")
        self.run("peer-w4-single", [PY, peer, "--data", W4_DATA, "--out", single, "--mode",
                                    "single", "--series", min(5, self.cfg["w4_series"] - 1),
                                    "--epochs", self.cfg["w4_epochs"], "--cores",
                                    self.cores[0]], env)
        pool = os.path.join(self.work, "peer-w4-pool.json")
        self.run("peer-w4-pool", [PY, peer, "--data", W4_DATA, "--out", pool, "--mode", "pool",
                                  "--workers", self.n, "--cores", ",".join(map(str, self.cores)),
                                  "--series-count", self.cfg["w4_series"],
                                  "--epochs", self.cfg["w4_epochs"]], env)
        with open(single) as f:
            s = json.load(f)
        with open(pool) as f:
            p = json.load(f)
        for arch in W4_ARCHS:
            self.add(f"w4.sps.{arch}.peer", s["per_arch"].get(arch, {}).get("samples_per_second"))
            self.add(f"w4.sps_pool.{arch}.peer",
                     p["per_arch"].get(arch, {}).get("samples_per_second"))
            self.add(f"w4.mse.{arch}.peer", p["per_arch"].get(arch, {}).get("mean_test_mse"))
        self.add("w4.wall.pool", p["makespan_seconds"])
        if p["failed"] or s["failed"]:
            raise BenchError(f"W4 peer: {p['failed'] + s['failed']} model(s) failed (logs: "
                             f"{self.log_path('peer-w4-pool')})")

    # ---- W5: a hyper-parameter search with pruning (w5_bench) ---------------------------------
    def w5_plan(self, unpruned=False):
        """examples/search/w5.yaml as it is, or derived into the work folder: --quick's fewer
        trials, and the unpruned variant (its scheduler rewritten to `none`)."""
        src = w5_bench.PLAN
        if not os.path.exists(src):
            raise NotAvailable(f"{shown([src])} is not in this checkout")
        trials = self.cfg["w5_trials"]
        if trials is None and not unpruned:
            return src
        name = "w5" + ("-unpruned" if unpruned else "") + ("-quick" if self.a.quick else "")
        try:
            return w5_bench.derive_plan(src, os.path.join(self.work, f"{name}.yaml"), trials,
                                        unpruned)
        except w5_bench.PlanRewriteError as e:
            raise BenchError(str(e))

    def w5_train(self, label, plan, workers):
        """One nnfleet W5 run reduced to w5_bench's summary (with its wall time), also saved
        beside its log."""
        out = os.path.join(self.work, f"r{self.round}-{label}")
        try:
            r = self.nnfleet_train(label, plan, workers, out, ok=("done", "pruned"))
        except BenchError as e:
            why = w5_bench.unavailable_reason(read(self.log_path(label))) if os.path.exists(
                self.log_path(label)) else None
            if why:
                raise NotAvailable(f"{why}; the plan: {shown([plan])}") from e
            raise
        try:
            summary = w5_bench.nnfleet_summary(r["results"])
        except KeyError as e:
            raise NotAvailable(f"this nnfleet's results.json lacks {e} ({out}), which a "
                               "search run writes (search_design.md \"Results\")") from e
        summary["wall"] = r["wall_to_run_end"]
        write_atomic(os.path.join(self.work, f"r{self.round}-{label}-summary.json"),
                     json.dumps(summary, indent=1))
        return summary

    def w5_add(self, side, summary):
        """A W5 run's figures under w5.<figure>.<side> (side: nnfleet, unpruned, peer)."""
        self.add(f"w5.wall.{side}", summary["wall"])
        for key in ("epochs_trained", "pruned", "trials"):
            self.add(f"w5.{key}.{side}", summary[key])
        best = summary["best"] or {}
        self.add(f"w5.best_val.{side}", best.get("val"))
        self.add(f"w5.best_test.{side}", best.get("test"))
        if best:
            self.info.setdefault(f"w5.best.{side}", []).append(best["name"])

    def w5_same(self, side, many, one):
        """Records whether the run on all cores and the 1-worker run are the same study."""
        same, difference = w5_bench.same_study(many, one)
        self.info[f"w5.same.{side}"] = {"same": same, "difference": difference}

    def w5_fleet(self):
        summary = self.w5_train("nnfleet-w5", self.w5_plan(), self.n)
        self.w5_add("nnfleet", summary)
        if getattr(self, "w5_first", None) is None:
            self.w5_first = summary

    def w5_nnfleet_once(self):
        """After the rounds: the plan on 1 worker (same study as the rounds' first run on all
        cores?), and unpruned on all cores (what pruning costs in epochs and accuracy)."""
        first = getattr(self, "w5_first", None)
        if first is None:
            raise NotAvailable("no W5 run of the rounds finished (see w5-search nnfleet)")
        one = self.w5_train("nnfleet-w5-1worker", self.w5_plan(), 1)
        self.add("w5.wall1.nnfleet", one["wall"])
        self.w5_same("nnfleet", first, one)
        self.w5_add("unpruned", self.w5_train("nnfleet-w5-unpruned", self.w5_plan(True), self.n))

    def w5_peer(self):
        """After the rounds: the Optuna peer on all cores, then on 1 worker (same study?)."""
        q = self.cfg["w5_peer"]
        probe = subprocess.run([PY, "-c", "import optuna, torch"], capture_output=True, text=True)
        if probe.returncode != 0:
            raise BenchError("failed to import optuna for W5's peer: "
                             f"{probe.stderr.strip().splitlines()[-1]}; expected Debian's "
                             "python3-optuna (scripts/setup --bench)")
        runs = {}
        for workers in dict.fromkeys((self.n, 1)):
            label = f"peer-w5-{workers}w"
            out = os.path.join(self.work, f"{label}.json")
            cmd = [PY, os.path.join(PEERS, "optuna_w5.py"), "--out", out, "--workers", workers,
                   "--cores", ",".join(map(str, self.cores[:workers])), "--trials", q["trials"],
                   "--train", q["train"], "--val", q["val"], "--test", q["test"],
                   "--fmnist-dir", FMNIST]
            self.run(label, cmd, self.peer_env(), timeout=6 * 3600)
            with open(out) as f:
                r = json.load(f)
            runs[workers] = dict(w5_bench.peer_summary(r), wall=r["wall_seconds"])
            self.info["optuna"] = r["optuna"]
            self.add(f"w5.cpu{'' if workers == self.n else '1'}.peer",
                     sum(w.get("cpu_seconds", 0) for w in r["per_worker"]))
        self.w5_add("peer", runs[self.n])
        self.add("w5.wall1.peer", runs[1]["wall"])
        self.w5_same("peer", runs[self.n], runs[1])

    def kernel_benchmarks(self):
        """bench/kernels/kernels_bench (Google Benchmark) once, pinned to one core, as JSON; on a
        CPU with AVX-512 also kernels_bench_avx2, the AVX2-only machines' path on this machine."""
        exe = os.path.join(self.build, "bench", "kernels", "kernels_bench")
        if not os.access(exe, os.X_OK):
            raise NotAvailable(f"{shown([exe])} is not built (the build's NNFLEET_BENCH option "
                               "builds it)")
        core = self.cores[0]
        self.kernels, self.kernels_core = [], core
        self.kernel_rows(exe, "kernels-bench", core, self.kernels)
        if self.machine.get("isa") != "AVX-512":
            return
        exe = os.path.join(self.build, "bench", "kernels", "kernels_bench_avx2")
        if not os.access(exe, os.X_OK):
            raise BenchError(f"{shown([exe])} is not built (the build's NNFLEET_TESTS option "
                             "builds the AVX2 kernels it links)")
        self.kernels_avx2 = []
        self.kernel_rows(exe, "kernels-bench-avx2", core, self.kernels_avx2)

    def kernel_rows(self, exe, label, core, rows):
        """Appends {name, samples_per_second, flops_per_second} per benchmark of one kernels_bench
        binary's run to `rows` (those that ran, before it raises for those that failed)."""
        p, _ = self.run(label, ["taskset", "-c", core, exe, "--benchmark_format=json",
                                f"--benchmark_min_time={self.cfg['kernels_min_time']}"])
        try:
            runs = json.loads(p.stdout)["benchmarks"]
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError(f"{label}: no Google Benchmark JSON on stdout ({e}; log: "
                             f"{self.log_path(label)})")
        bad = []
        for r in runs:
            if r.get("run_type", "iteration") != "iteration":
                continue
            if r.get("error_occurred"):
                bad.append(f"{r.get('name')} ({r.get('error_message', 'error')})")
                continue
            rows.append({"name": r["name"], "samples_per_second": r.get("samples/s"),
                         "flops_per_second": r.get("FLOP/s")})
        if bad:
            raise BenchError(f"{label}: benchmarks failed: {', '.join(bad)} (log: "
                             f"{self.log_path(label)})")
        if not rows:
            raise BenchError(f"{label}: the JSON lists no benchmarks (log: {self.log_path(label)})")

    # ---- profiles of the scenarios behind missed targets (bench_probe) -----------------------
    def profile_missed(self):
        """Records a profile of each scenario whose target this run missed."""
        scenarios = bench_report.missed_scenarios(bench_report.Run(self.raw()))
        cap = self.cfg["profile_max"]
        if cap is not None:
            for scen in scenarios[cap:]:
                self.profiles[scen] = {"skipped": f"a --quick run profiles only its first {cap}"}
            scenarios = scenarios[:cap]
        tools = {}
        for scen in scenarios:
            if scen in bench_report.UNPROFILED:
                self.profiles[scen] = {"skipped": bench_report.UNPROFILED[scen]}
                continue
            kind = "memory" if scen == "w1-memory" else "time"
            if kind not in tools:
                tools[kind] = bench_probe.tool_for(kind, self.a.profiler)
            tool = tools[kind]
            if tool is None:
                self.profiles[scen] = {"skipped": "the run was told --profiler none"}
                continue
            print(f"    profile {scen} ({tool}) ...", flush=True)
            try:
                cmd, reduced = self.profile_command(scen, tool)
            except (BenchError, OSError, KeyError) as e:
                self.profiles[scen] = {"tool": tool, "error": str(e)}
                continue
            p = bench_probe.record(tool, cmd, os.path.join(self.work, "profiles"), scen, {},
                                   lambda label, c, env: self.run(label, c, env, timeout=1800))
            p["command"] = self.commands.get(f"profile-{scen}")
            p["reduced"] = reduced
            p["forced"] = self.a.profiler != "auto"
            self.profiles[scen] = p

    def profile_size(self, rate, tool, lo, hi):
        """How many samples make a short profile: the configured seconds at the measured rate."""
        secs = self.cfg["profile_seconds"]["perf" if tool == "perf" else "valgrind"]
        return int(max(lo, min(hi, (rate or 0) * secs)))

    def profile_command(self, scen, tool):
        """(the command, what was reduced or None) of a scenario to profile. Under valgrind a
        fleet runs with one worker: valgrind runs threads one at a time, and nnfleet's helpers
        spin while they wait for work, so more workers would profile the waiting."""
        out = os.path.join(self.work, "profiles", f"{scen}-out")
        fleet = self.n if tool == "perf" else 1
        cut = [] if fleet == self.n else ["one worker (valgrind runs one thread at a time)"]
        n_test = 500 if tool == "perf" else 32  # valgrind runs nnfleet's kernels very slowly
        reduced = lambda parts: "; ".join(parts) or None  # noqa: E731

        def train(plan, workers):
            return [self.nnfleet, "train", plan, "--workers", str(workers), "--out", out]
        one = bench_report.w1_model_of(scen)
        if scen == "w1-memory" and tool == "smaps":
            return train(self.plans["w1"], self.n), None  # the measured run itself, sampled
        if one or scen in ("w1-fleet", "w1-memory"):
            models, workers = ([one], 1) if one else (self.w1_models, fleet)
            rate = (median(self.values.get(f"w1.sps.{one}.nnfleet", [])) if one else
                    div(self.n_train, median(self.values.get("w1.wall1.nnfleet", []))))
            n = self.profile_size(rate, tool, 32, self.n_train)
            cut = [] if one else cut
            if n >= self.n_train:
                plan = self.plans["w1"] if not one else self.w1_plan(
                    models, self.fmnist_dir, f"profile-{scen}")
                return train(plan, workers), reduced(cut)
            return train(self.w1_subset_plan(models, n, n_test, f"profile-{scen}"), workers), \
                reduced([f"the first {n:,} training and {n_test} test images"] + cut)
        if scen == "w1-launch":
            if tool == "perf":
                return train(self.w1_plan(["m1"], self.fmnist_dir, "profile-w1-launch"), 1), None
            n = min(self.n_train, 2000)
            return (train(self.w1_subset_plan(["m1"], n, n_test, "profile-w1-launch"), 1),
                    f"the first {n:,} training and {n_test} test images")
        if scen in ("w2-b256", "w2-b1"):
            batch = 256 if scen == "w2-b256" else 1
            model = os.path.join(getattr(self, "w1_out", ""), "models", "m7.keras")
            if not os.path.exists(model):
                raise BenchError(f"no m7 model to predict with ({model} is missing)")
            rate = median(self.values.get(f"w2.b{batch}.nnfleet", []))
            n = self.profile_size(rate, tool, 32, self.n_train)
            d = os.path.join(DATA, f"fmnist-first{n}")
            write_idx_subset(d, n, 1)
            cmd = [self.nnfleet, "predict", model,
                   "--x", os.path.join(d, "train-images-idx3-ubyte.gz"),
                   "--y", os.path.join(d, "train-labels-idx1-ubyte.gz"), "--scale", repr(1 / 255),
                   "--loss", "sparse_categorical_crossentropy", "--batch", batch, "--workers", 1,
                   "--out", os.path.join(self.work, "profiles", f"{scen}.npy")]
            return cmd, f"the first {n:,} training images"
        if scen == "tiny-fleet":
            if tool == "perf":
                return train(self.tiny_plan, fleet), reduced(cut)
            n = 800  # valgrind runs the 8,000 about fifty times slower
            plan = tiny_overhead.write_inputs(os.path.join(self.work, "profile-tiny"), n)
            return train(plan, fleet), reduced([f"{n} of the tiny models"] + cut)
        if scen == "w4-fleet":
            series = 1 if tool != "perf" else self.cfg["w4_series"]
            return train(self.w4_plan(series, 1, "profile-w4"), fleet), reduced(
                [f"{series} series for 1 epoch"] + cut)
        if scen == "w5-search":
            if tool == "perf":
                return train(self.w5_plan(), fleet), reduced(cut)
            n = 3  # valgrind: a few trials show the same per-epoch work
            plan = w5_bench.derive_plan(w5_bench.PLAN, os.path.join(self.work, "profile-w5.yaml"),
                                        trials=n)
            return train(plan, fleet), reduced([f"{n} of the trials"] + cut)
        if scen == "w3-fleet":
            if tool == "perf" or self.a.quick:
                return train(self.plans["w3"], fleet), reduced(cut)
            grid = {"width": [16], "act": ["relu"], "lr": [0.003], "bs": [32]}
            plan = self.w3_plan(grid, 1, "profile-w3")
            return train(plan, fleet), reduced(
                [f"{len(workloads.w3_specs(grid=grid))} of the grid's models for 1 epoch"] + cut)
        raise BenchError(f"no profile is defined for scenario '{scen}'")

    # ---- the run ------------------------------------------------------------------------------
    def raw(self):
        """Everything bench_report needs to render this run, as saved in raw.json."""
        rel = lambda p: os.path.relpath(p, REPO) if p.startswith(REPO + "/") else p  # noqa: E731
        return {"mode": self.mode, "rounds": self.a.rounds, "started": self.started,
                "elapsed": getattr(self, "elapsed", time.time() - self.t0), "cores": self.cores,
                "machine": self.machine, "version": self.version, "nnfleet": rel(self.nnfleet),
                "work": rel(self.work), "raw_path": rel(os.path.join(self.work, "raw.json")),
                "w1_models": self.w1_models, "n_train": self.n_train, "n_test": self.n_test,
                "w2_b1": self.cfg["w2_b1"], "w3_jobs": self.w3_jobs,
                "tiny_models": self.cfg["tiny_models"], "many_models": self.cfg["many_models"],
                "w3_pack": self.cfg["w3_pack"],
                "w4": {"series": self.cfg["w4_series"], "epochs": self.cfg["w4_epochs"]},
                "w5": {"trials": self.cfg["w5_trials"] or workloads.W5_TRIALS,
                       "peer": self.cfg["w5_peer"], "max_epochs": workloads.W5_MAX_EPOCHS},
                "values": self.values,
                "info": self.info, "unavailable": self.unavailable, "failures": self.failures,
                "commands": self.commands, "loads": self.loads, "kernels": self.kernels,
                "kernels_core": self.kernels_core, "kernels_avx2": self.kernels_avx2,
                "profiles": self.profiles}

    def save_raw(self):
        raw = self.raw()
        write_atomic(os.path.join(self.work, "raw.json"), json.dumps(raw, indent=1, default=str))
        return json.loads(json.dumps(raw, default=str))

    def run_all(self):
        self.t0 = time.time()
        self.started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.preflight()
        for self.round in range(1, self.a.rounds + 1):
            before = os.getloadavg()[0]
            self.step("sgemm", self.sgemm)
            self.step("fma-probe", self.fma_probe)
            self.step("w1-1core nnfleet", self.w1_1core)
            self.step("w1-1core peer", self.w1_1core_peer)
            self.step("w1-fleet nnfleet", self.w1_fleet)
            self.step("w1-fleet peer", self.w1_fleet_peer)
            self.step("w2 nnfleet", self.w2_nnfleet)
            self.step("w2 peer torch", self.w2_torch)
            self.step("w2 peer onnxruntime", self.w2_ort)
            self.step("w3-1core nnfleet", self.w3_1core)
            self.step("w3-fleet nnfleet", self.w3_fleet)
            self.step("w3-fleet peer recipe", lambda: self.w3_fleet_peer("fresh"))
            self.step("w3-fleet peer pool", lambda: self.w3_fleet_peer("pool"))
            self.step("tiny-fleet nnfleet", self.tiny)
            self.step("w4-fleet nnfleet", self.w4_fleet)
            self.step("w5-search nnfleet", self.w5_fleet)
            self.loads.append((self.round, before, os.getloadavg()[0]))
        self.step("w4 peer (once)", self.w4_peer)
        self.step("w5 nnfleet (once)", self.w5_nnfleet_once)
        self.step("w5 peer (once)", self.w5_peer)
        self.step("many models (once)", self.many_models)
        self.step("w3 packed (once)", self.w3_pack)
        self.step("kernels", self.kernel_benchmarks)
        self.save_raw()  # the measurements are safe before the profiles run
        self.step("profiles", self.profile_missed)
        self.elapsed = time.time() - self.t0
        raw = self.save_raw()
        try:
            bench_report.write(bench_report.Run(raw), self.md)
        except ValueError as e:
            raise BenchError(f"{e} (raw results: {os.path.join(self.work, 'raw.json')})")
        print(f"\nrun_bench: wrote {self.md} ({self.mode}, {self.a.rounds} rounds, "
              f"{self.elapsed:.0f} s); raw figures and logs in {self.work}; re-render with "
              f"bench/bench_report.py {os.path.join(self.work, 'raw.json')}")
        if self.a.quick and self.elapsed > 300:
            print(f"run_bench: warning: --quick took {self.elapsed:.0f} s (> 300 s)")
        for s, why in self.unavailable.items():
            print(f"run_bench: not available: {s}: {why}")
        for r, s, msg in self.failures:
            print(f"run_bench: FAILED (round {r}) {s}: {msg}", file=sys.stderr)
        return 1 if self.failures else 0


def div(a, b):
    return a / b if a is not None and b else None


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


def read(path):
    with open(path) as f:
        return f.read()


def must_sub(text, old, new, count, path):
    found = text.count(old)
    if found != count:
        raise BenchError(f"failed to derive the --quick plan from {path}: expected '{old}' "
                         f"{count} time(s), got {found}; update bench/run_bench.py's make_plans")
    return text.replace(old, new)


def keep_models(text, names, path):
    """A plan's text with only the model entries (`  - name: X` blocks) named."""
    head, sep, body = text.partition("\nmodels:\n")
    if not sep:
        raise BenchError(f"failed to derive the --quick plan from {path}: no 'models:' section")
    blocks = re.split(r"(?m)^(?=  - name: )", body)
    kept, seen = [], set()
    for blk in blocks:
        m = re.match(r"  - name: (\S+)", blk)
        if m is None:
            kept.append(blk)  # comments before the first entry
        elif m.group(1) in names:
            kept.append(blk)
            seen.add(m.group(1))
    if seen != set(names):
        raise BenchError(f"failed to derive the --quick plan from {path}: models "
                         f"{sorted(set(names) - seen)} not found")
    return head + sep + "".join(kept)


def write_idx_subset(out_dir, n_train, n_test):
    """The first n images and labels of Fashion-MNIST's files, as gzipped IDX like Debian's."""
    os.makedirs(out_dir, exist_ok=True)
    for stem, header, per in FMNIST_FILES:
        n = n_train if stem.startswith("train") else n_test
        dst = os.path.join(out_dir, stem + ".gz")
        if os.path.exists(dst):
            continue
        with gzip.open(os.path.join(FMNIST, stem + ".gz"), "rb") as f:
            raw = f.read(header + n * per)
        head = bytearray(raw[:header])
        head[4:8] = struct.pack(">I", n)
        tmp = f"{dst}.tmp.{os.getpid()}"
        with gzip.open(tmp, "wb", compresslevel=6) as f:
            f.write(bytes(head) + raw[header:header + n * per])
        os.replace(tmp, dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced work, same structure (< 5 min)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--build", default="build", help="the build folder (default build)")
    ap.add_argument("--nnfleet", help="the tool to measure (default BUILD/nnfleet)")
    ap.add_argument("--profiler", choices=["auto", "perf", "callgrind", "none"], default="auto",
                    help="how missed targets are profiled (default auto: perf where `perf stat "
                         "-e instructions` counts, else callgrind; memory always massif)")
    ap.add_argument("--md", help="where to write the tables (default BENCHMARKS.md; --quick: "
                                 "BUILD/bench/BENCHMARKS-quick.md)")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds: expected at least 1")
    try:
        sys.exit(Bench(a).run_all())
    except BenchError as e:
        sys.exit(f"run_bench: {e}")


if __name__ == "__main__":
    main()
