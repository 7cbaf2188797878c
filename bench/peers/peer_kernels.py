#!/usr/bin/python3
"""Which kernels the PyTorch peer really runs on this machine: OpenBLAS's core (threadpoolctl)
and the oneDNN implementation of m7's convolutions (DNNL_VERBOSE), for BENCHMARKS.md's Machine
table. Prints one JSON line.

  peer_kernels.py --core C

OpenBLAS picks its kernels at load time from the CPU, unless OPENBLAS_CORETYPE holds it to a
named core (old OpenBLAS builds needed that on new CPUs); the benchmark runs its peers with that
variable and OPENBLAS_L2_SIZE unset, and this probe shows what OpenBLAS chose then. The probe
runs itself once more as a child with DNNL_VERBOSE=1 (oneDNN reads it when it first runs a
primitive), does m7's two convolutions forward and backward at batch 32 in that child, and
reads oneDNN's `exec` lines: primitive kind, propagation and implementation (e.g. jit:avx2).
"""
import argparse
import json
import os
import subprocess
import sys

MARK = "PEER_KERNELS_RESULT "


def child():
    """Runs m7's convolutions once each way, then prints the thread pools threadpoolctl sees."""
    import threadpoolctl
    import torch
    torch.set_num_threads(1)
    x = torch.randn(32, 1, 28, 28, requires_grad=True)
    c1 = torch.nn.Conv2d(1, 32, 3)
    c2 = torch.nn.Conv2d(32, 64, 3)
    d = torch.nn.Linear(9216, 128)  # m7's Dense: a BLAS sgemm, so that the BLAS is loaded
    h = torch.relu(c2(torch.relu(c1(x))))
    d(torch.nn.functional.max_pool2d(h, 2).flatten(1)).sum().backward()
    pools = [{k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                    "filepath")}
             for p in threadpoolctl.threadpool_info()]
    print(MARK + json.dumps({"pools": pools, "torch": torch.__version__,
                             "mkldnn": torch.backends.mkldnn.is_available()}), flush=True)


def parse_verbose(lines):
    """oneDNN 2.x `exec` lines: onednn_verbose,exec,cpu,convolution,jit:avx2,forward_training,..."""
    seen = []
    for line in lines:
        f = line.split(",")
        if len(f) > 5 and f[0] in ("dnnl_verbose", "onednn_verbose") and f[1] == "exec":
            item = f"{f[3]} {f[5]}: {f[4]}"
            if item not in seen:
                seen.append(item)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--core", type=int, required=True)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.sched_setaffinity(0, {a.core})
    if a.child:
        child()
        return
    env = dict(os.environ, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    p = subprocess.run([sys.executable, __file__, "--core", str(a.core), "--child"], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"failed to probe the peer's kernels: the child exited with code {p.returncode}:"
                 f" {p.stderr.strip().splitlines()[-1:]}")
    lines = p.stdout.splitlines()
    result = [json.loads(ln[len(MARK):]) for ln in lines if ln.startswith(MARK)]
    if len(result) != 1:
        sys.exit("failed to probe the peer's kernels: expected one result line from the child, "
                 f"got {len(result)}")
    r = result[0]
    r["onednn"] = parse_verbose(lines)
    r["openblas_coretype_env"] = os.environ.get("OPENBLAS_CORETYPE")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
