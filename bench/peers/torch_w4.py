#!/usr/bin/python3
"""W4's peer (/work/shared/workloads.md, "W4: one small model per series"): the forecasters of
each series (LSTM(32)+Dense(1), GRU(32)+Dense(1), two causal Conv1D(16, 5) with dilation 1 and 2,
GlobalAveragePooling1D, Dense(1)) trained with PyTorch, the way users do it, and one JSON result.

  torch_w4.py --data DIR --out RESULT.json --mode single [--series K] [--epochs E]
  torch_w4.py --data DIR --out RESULT.json --mode pool --workers N [--series-count S] [--epochs E]

--mode single trains the three models of one series one after another in this process, pinned
to one core with one thread: each architecture's single-core training samples/s.
--mode pool is the pooled recipe: N long-lived worker processes, each pinned to its own core with
one thread (torch.set_num_threads(1), OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1), importing torch
once and training the jobs of one shared queue, longest first (LSTM, then GRU, then Conv1D);
the makespan runs from starting the workers to the last model finished.

Keras-equivalent models: glorot_uniform kernels (torch's xavier_uniform_ has the same fans for
the [4u, in] / [out, in, k] layouts), orthogonal recurrent kernels, zero biases (PyTorch's second
recurrent bias too), LSTM unit_forget_bias (the forget slice of one bias set to 1, as Keras's
single bias), GRU as Keras 3's reset_after=True (PyTorch's only GRU), causal padding as a left pad
of (k-1)*dilation. Mean squared error, Adam(1e-3, 0.9, 0.999, eps=1e-7), batch 32, reshuffled
every epoch, last partial batch kept. Data: the .npy files of tools/make_w4_series.py.

Per model: name, arch, series, train_samples, epochs, train_seconds (the training loop only),
samples_per_second (train_samples x epochs / train_seconds), test_mse, core, ok.
"""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

ARCHS = ("lstm", "gru", "tcn")  # longest first (workloads.md's reference times)
SERIES = 32
EPOCHS = 10
BATCH = 32


def series_files(data, k, part):
    return (os.path.join(data, f"series_{k:02d}_{part}_x.npy"),
            os.path.join(data, f"series_{k:02d}_{part}_y.npy"))


def make_model(arch):
    import torch
    from torch import nn

    class Recurrent(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.rnn = cell(input_size=1, hidden_size=32, batch_first=True)
            self.out = nn.Linear(32, 1)
            nn.init.xavier_uniform_(self.rnn.weight_ih_l0)
            nn.init.orthogonal_(self.rnn.weight_hh_l0)
            nn.init.zeros_(self.rnn.bias_ih_l0)
            nn.init.zeros_(self.rnn.bias_hh_l0)
            if cell is nn.LSTM:
                with torch.no_grad():
                    self.rnn.bias_ih_l0[32:64] = 1.0  # Keras unit_forget_bias
            nn.init.xavier_uniform_(self.out.weight)
            nn.init.zeros_(self.out.bias)

        def forward(self, x):  # x [N, T, 1]
            seq, _ = self.rnn(x)
            return self.out(seq[:, -1, :])

    class Tcn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(1, 16, 5, dilation=1)
            self.c2 = nn.Conv1d(16, 16, 5, dilation=2)
            self.out = nn.Linear(16, 1)
            for m in (self.c1, self.c2, self.out):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

        def forward(self, x):  # x [N, T, 1] channels_last, as Keras; Conv1d wants [N, C, T]
            h = x.transpose(1, 2)
            h = torch.relu(self.c1(nn.functional.pad(h, (4, 0))))
            h = torch.relu(self.c2(nn.functional.pad(h, (8, 0))))
            return self.out(h.mean(dim=2))

    if arch == "lstm":
        return Recurrent(nn.LSTM)
    if arch == "gru":
        return Recurrent(nn.GRU)
    return Tcn()


def pin(core):
    os.sched_setaffinity(0, {core})
    import torch
    torch.set_num_threads(1)


def train_one(job, data, seed):
    import numpy as np
    import torch
    torch.manual_seed(seed)
    k, arch, epochs = job["series"], job["arch"], job["epochs"]
    x, y = (torch.from_numpy(np.load(p)) for p in series_files(data, k, "train"))
    tx, ty = (torch.from_numpy(np.load(p)) for p in series_files(data, k, "test"))
    model = make_model(arch)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = torch.nn.MSELoss()
    n = x.shape[0]
    t0 = time.perf_counter()
    for _ in range(epochs):
        perm = torch.randperm(n)
        for i in range(0, n, BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        test_mse = float(loss_fn(model(tx), ty))
    return {"name": f"{arch}-{k:02d}", "arch": arch, "series": k, "train_samples": n,
            "epochs": epochs, "train_seconds": seconds, "samples_per_second": n * epochs / seconds,
            "test_mse": test_mse, "ok": True}


def run_job(job, data, core):
    try:
        r = train_one(job, data, seed=1000 * job["series"] + ARCHS.index(job["arch"]))
    except Exception:  # one bad model never stops the others; the result says why
        r = {"name": f"{job['arch']}-{job['series']:02d}", "ok": False,
             "error": traceback.format_exc(limit=3)}
    r["core"] = core
    return r


def pool_worker(core, data, jobs, results):
    pin(core)
    while True:
        job = jobs.get()
        if job is None:
            return
        results.put(run_job(job, data, core))


def run_pool(a, cores):
    jobs = [{"series": k, "arch": arch, "epochs": a.epochs}
            for arch in ARCHS for k in range(a.series_count)]
    ctx = mp.get_context("fork")
    q, res = ctx.Queue(), ctx.Queue()
    for j in jobs:
        q.put(j)
    for _ in cores:
        q.put(None)
    t0 = time.perf_counter()
    procs = [ctx.Process(target=pool_worker, args=(c, a.data, q, res)) for c in cores]
    for p in procs:
        p.start()
    out = [res.get() for _ in jobs]
    makespan = time.perf_counter() - t0
    for p in procs:
        p.join()
    return {"mode": "pool", "workers": len(cores), "cores": cores, "makespan_seconds": makespan,
            "models": out}


def run_single(a, core):
    pin(core)
    out = [run_job({"series": a.series, "arch": arch, "epochs": a.epochs}, a.data, core)
           for arch in ARCHS]
    return {"mode": "single", "cores": [core], "models": out}


def summarize(result):
    by = {}
    for m in result["models"]:
        if m.get("ok"):
            by.setdefault(m["arch"], []).append(m)
    result["per_arch"] = {
        arch: {"models": len(ms),
               "samples_per_second": sum(m["samples_per_second"] for m in ms) / len(ms),
               "mean_test_mse": sum(m["test_mse"] for m in ms) / len(ms)}
        for arch, ms in by.items()}
    result["failed"] = sum(1 for m in result["models"] if not m.get("ok"))
    import torch
    result["torch_version"] = torch.__version__
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder of tools/make_w4_series.py's files")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["single", "pool"], required=True)
    ap.add_argument("--workers", type=int, default=0, help="pool: processes (0: every core)")
    ap.add_argument("--cores", default="", help="cores to use, e.g. 0,1 (default: allowed ones)")
    ap.add_argument("--series", type=int, default=5, help="single: the series trained")
    ap.add_argument("--series-count", type=int, default=SERIES, help="pool: series 0..S-1")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    a = ap.parse_args()
    cores = ([int(c) for c in a.cores.split(",")] if a.cores
             else sorted(os.sched_getaffinity(0)))
    if a.mode == "pool":
        cores = cores[:a.workers] if a.workers > 0 else cores
        result = run_pool(a, cores)
    else:
        result = run_single(a, cores[0])
    result = summarize(result)
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, a.out)
    for m in result["models"]:
        if not m.get("ok"):
            print(f"torch_w4: model {m['name']} failed: {m.get('error')}", file=sys.stderr)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
