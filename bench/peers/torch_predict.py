#!/usr/bin/python3
"""The W2 peer with PyTorch: loads m7 (a torch_peer.py --save state_dict, m7 after 1 epoch of W1),
predicts Fashion-MNIST's training images and the per-sample categorical cross-entropy, at each
batch size asked, and prints one JSON line.

  torch_predict.py --state m7.pt --core C [--batch 1,32,256] [--limit B=N ...] [--shard I/N]
                   [--fmnist-dir D]

Pinned to one core, one thread (the recipe of /work/shared/workloads.md). --limit 1=10000 predicts
only the first 10,000 images at batch 1 (a rate, to keep the run short); --shard 0/2 takes the
first half of the images, for the all-cores figure (one process per core). Timed per batch size:
the loop over the images (forward, softmax, per-sample loss, results copied out), after one
warm-up batch; load_seconds is torch.load + load_state_dict of the model file.
"""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402
import workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state", required=True, help="m7 state_dict (torch_peer.py --save)")
    ap.add_argument("--core", type=int)
    ap.add_argument("--batch", default="1,32,256")
    ap.add_argument("--limit", action="append", default=[], metavar="B=N")
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--fmnist-dir", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch_peer.setup(a.core)
    import numpy as np
    import torch
    import torch.nn.functional as F

    x, y, _, _ = torch_peer.Data(a.fmnist_dir, None).get("w1")
    shard, shards = (int(v) for v in a.shard.split("/"))
    lo, hi = x.shape[0] * shard // shards, x.shape[0] * (shard + 1) // shards
    x, y = x[lo:hi], y[lo:hi]
    limits = {int(k): int(v) for k, v in (s.split("=") for s in a.limit)}

    t = time.perf_counter()
    model = torch_peer.build_model(workloads.w1_spec("m7"))
    model.load_state_dict(torch.load(a.state))
    model.eval()
    load_seconds = time.perf_counter() - t

    out = {"load_seconds": load_seconds, "shard": a.shard, "batches": {}}
    with torch.inference_mode():
        for b in (int(v) for v in a.batch.split(",")):
            n = min(limits.get(b, x.shape[0]), x.shape[0])
            pred = np.empty((n, 10), np.float32)
            loss = np.empty((n,), np.float32)
            model(x[:b])  # warm-up
            t = time.perf_counter()
            for i in range(0, n, b):
                logits = model(x[i:i + b])
                pred[i:i + b] = F.softmax(logits, dim=1).numpy()
                loss[i:i + b] = F.cross_entropy(logits, y[i:i + b], reduction="none").numpy()
            s = time.perf_counter() - t
            out["batches"][str(b)] = {
                "samples": n, "seconds": s, "samples_per_second": n / s,
                "mean_loss": float(loss.mean()),
                "accuracy": float((pred.argmax(1) == y[:n].numpy()).mean())}
    out["peak_rss_bytes"] = torch_peer.peak_rss_bytes()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
