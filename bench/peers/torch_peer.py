#!/usr/bin/python3
"""The peer: trains one W1 or W3 model with PyTorch the way the seeds' users do, and prints one
JSON line with what it measured.

  torch_peer.py --job JSON --core C [--launch-time T] [--fmnist-dir D] [--digits-dir D]
                [--save PATH]
  torch_peer.py --serve --core C [--fmnist-dir D] [--digits-dir D]

The recipe (/work/shared/workloads.md): one process per model, pinned to one core with
os.sched_setaffinity, torch.set_num_threads(1), OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1 (set here
before torch loads, and by the launcher), the data loaded from its files inside the process
(Fashion-MNIST from Debian's .gz IDX files; digits from the .npy files of
tools/make_digits_data.py). Keras-equivalent model: glorot_uniform weights, zero biases, "valid"
convolutions, Adam(lr, 0.9, 0.999, eps=1e-7), batch size from the job, reshuffled every epoch,
last partial batch kept. The final softmax and the sparse categorical cross-entropy are fused
into F.cross_entropy on logits, as a PyTorch user writes it (the same function). Images are NCHW,
PyTorch's native layout. Batches are gathered by slicing a random permutation of the in-memory
tensors (faster than a DataLoader, which only adds per-sample Python calls).

--serve is the pooled variant (the best a careful Python user would do): a long-lived worker that
imports torch once, keeps each data set once loaded, and trains the jobs it reads from stdin, one
JSON line each, answering one JSON line each on stdout.

Printed per job: name, params, train_samples, train_seconds (the training loop only),
samples_per_second, first_step_seconds (from process launch to the first training step: the
launcher's --launch-time when given, else the process start time from /proc/self/stat),
test_accuracy, peak_rss_bytes (this process's maximum resident set), ok.
"""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402


def process_start_time():
    """Wall-clock time this process started, from /proc/self/stat (10 ms resolution)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])  # field 22, counted after the ")" that ends the command name
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + start_ticks / hz


def read_idx_gz(path, header):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=header)


class Data:
    """Data sets loaded on first use and kept (the pooled worker reuses them)."""

    def __init__(self, fmnist_dir, digits_dir):
        self.fmnist_dir = fmnist_dir
        self.digits_dir = digits_dir
        self.cache = {}

    def get(self, workload):
        if workload not in self.cache:
            self.cache[workload] = self._load(workload)
        return self.cache[workload]

    def _load(self, workload):
        import numpy as np
        import torch
        if workload == "w1":
            d = self.fmnist_dir

            def images(stem):
                a = read_idx_gz(os.path.join(d, stem), 16)
                return torch.from_numpy(
                    (a.reshape(-1, 1, 28, 28).astype(np.float32) * np.float32(1 / 255)))

            def labels(stem):
                return torch.from_numpy(read_idx_gz(os.path.join(d, stem), 8).astype(np.int64))

            return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
                    images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))
        d = self.digits_dir

        def npy(name):
            return np.load(os.path.join(d, name))

        return (torch.from_numpy(npy("digits_x_train.npy").astype(np.float32)),
                torch.from_numpy(npy("digits_y_train.npy").astype(np.int64)),
                torch.from_numpy(npy("digits_x_test.npy").astype(np.float32)),
                torch.from_numpy(npy("digits_y_test.npy").astype(np.int64)))


def build_model(spec):
    """The torch equivalent of a job's Keras layer list; the final softmax is left to the loss."""
    import torch
    from torch import nn
    layers = workloads.spec_layers(spec)
    in_shape = workloads.spec_input(spec)
    mods = []
    c = in_shape[-1] if len(in_shape) == 3 else None
    flat = None if len(in_shape) == 3 else in_shape[0]
    h = in_shape[0] if len(in_shape) == 3 else None
    for i, layer in enumerate(layers):
        kind = layer[0]
        last = i == len(layers) - 1
        if kind == "flatten":
            mods.append(nn.Flatten())
            flat = h * h * c
        elif kind == "dense":
            lin = nn.Linear(flat, layer[1])
            mods.append(lin)
            flat = layer[1]
            act = layer[2]
            if not last:
                mods.append(nn.ReLU() if act == "relu" else nn.Tanh())
            elif act != "softmax":
                raise ValueError(f"the last layer must be softmax, got {act}")
        elif kind == "conv":
            mods.append(nn.Conv2d(c, layer[1], layer[2]))
            mods.append(nn.ReLU())
            c = layer[1]
            h = h - layer[2] + 1
        elif kind == "maxpool":
            mods.append(nn.MaxPool2d(layer[1]))
            h //= layer[1]
        elif kind == "dropout":
            mods.append(nn.Dropout(layer[1]))
    model = nn.Sequential(*mods)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.xavier_uniform_(m.weight)  # glorot_uniform; same fans as Keras
                nn.init.zeros_(m.bias)
    return model


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_job(spec, data, launch_time, save=None):
    import torch
    import torch.nn.functional as F
    x, y, xt, yt = data.get(spec["workload"])
    torch.manual_seed(spec.get("seed", 1))
    model = build_model(spec)
    opt = torch.optim.Adam(model.parameters(), lr=spec["lr"], betas=(0.9, 0.999), eps=1e-7)
    bs = spec["batch_size"]
    n = x.shape[0]
    first_step = None
    model.train()
    t0 = time.perf_counter()
    for _ in range(spec["epochs"]):
        perm = torch.randperm(n)
        for i in range(0, n, bs):
            if first_step is None:
                first_step = time.time() - launch_time
            idx = perm[i:i + bs]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
    train_seconds = time.perf_counter() - t0
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, xt.shape[0], 1000):
            correct += int((model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum())
    if save:
        tmp = f"{save}.tmp.{os.getpid()}"
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, save)
    samples = n * spec["epochs"]
    return {"name": spec["name"], "ok": True,
            "params": sum(p.numel() for p in model.parameters()),
            "train_samples": samples, "train_seconds": train_seconds,
            "samples_per_second": samples / train_seconds if train_seconds > 0 else None,
            "first_step_seconds": first_step,
            "test_accuracy": correct / xt.shape[0], "peak_rss_bytes": peak_rss_bytes()}


def setup(core):
    if core is not None:
        os.sched_setaffinity(0, {core})
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job", help="the job spec, JSON (see workloads.py)")
    ap.add_argument("--serve", action="store_true", help="pooled worker: jobs on stdin")
    ap.add_argument("--core", type=int, help="the core to pin this process to")
    ap.add_argument("--launch-time", type=float, help="time.time() when the launcher spawned us")
    ap.add_argument("--fmnist-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--digits-dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bench-data"))
    ap.add_argument("--save", help="write the trained state_dict here (torch.save)")
    a = ap.parse_args()
    if bool(a.job) == a.serve:
        ap.error("expected exactly one of --job and --serve")
    launch = a.launch_time if a.launch_time is not None else process_start_time()
    setup(a.core)
    data = Data(a.fmnist_dir, a.digits_dir)
    if a.job:
        print(json.dumps(run_job(json.loads(a.job), data, launch, a.save)), flush=True)
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = json.loads(line)
        try:
            r = run_job(spec, data, time.time())
        except Exception as e:  # one bad job must not kill the pool; report it
            r = {"name": spec.get("name"), "ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
