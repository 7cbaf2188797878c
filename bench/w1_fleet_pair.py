#!/usr/bin/python3
"""W1's fleet on all cores, nnfleet and its PyTorch peer side by side, alone: the two rows of
`make bench` behind "W1 makespan" and "W1 peak resident memory", without the rest of the run.

Runs bench/run_bench.py's own steps (the same plans, peer, environment and measurements) for
--rounds interleaved rounds and prints each round's figures and their medians as JSON: the wall
time of each side, nnfleet's peak resident memory (the run's own figure), the peer's sampled sum
over its processes, and the ratios. For checking one change against the peer between full runs;
BENCHMARKS.md's tables come from the full run.

    /usr/bin/python3 bench/w1_fleet_pair.py --rounds 3

--one-core: the rows behind "W1 mN training samples/s, 1 core" instead: every W1 model trained
on one core by each side (`make bench`'s w1-1core steps), each model's samples/s and their ratio.

    /usr/bin/python3 bench/w1_fleet_pair.py --one-core --rounds 2

The fleet rows also give nnfleet's launch to its first training step ("W1 launch to first training
step"), as `make bench` records it from the same runs.

--w3: the rows behind "W3 makespan, 2 cores vs the pooled peer" and "W3 scaling" instead: W3 on
one worker and on all cores (`make bench`'s w3-1core and w3-fleet steps) and the pooled PyTorch
peer on all cores, interleaved; each round's wall times and the medians' ratios.

    /usr/bin/python3 bench/w1_fleet_pair.py --w3 --rounds 3
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402


def failed(b):
    """Whether a step failed, each failure printed on stderr."""
    for r, s, msg in b.failures:
        print(f"w1_fleet_pair: FAILED (round {r}) {s}: {msg}", file=sys.stderr)
    return bool(b.failures)


def one_core(b, rounds):
    """Every W1 model on one core, each side, interleaved; per model the medians and ratio."""
    for b.round in range(1, rounds + 1):
        b.step("w1-1core nnfleet", b.w1_1core)
        b.step("w1-1core peer", b.w1_1core_peer)
    if failed(b):
        return 1
    v = b.values
    out = {}
    for name in b.w1_models:
        ours, peer = v[f"w1.sps.{name}.nnfleet"], v[f"w1.sps.{name}.peer"]
        out[name] = {"nnfleet_sps": [round(x) for x in ours], "peer_sps": [round(x) for x in peer],
                     "ratio": round(statistics.median(ours) / statistics.median(peer), 2)}
        print(json.dumps({name: out[name]}))
    print(json.dumps({"nnfleet_launch_s": v["w1.launch.nnfleet"], "rounds": rounds,
                      "work": b.work}))
    return 0


def w3(b, rounds):
    """W3 on one worker, on all cores and on the pooled peer, interleaved; walls and ratios."""
    for b.round in range(1, rounds + 1):
        b.step("w3-1core nnfleet", b.w3_1core)
        b.step("w3-fleet nnfleet", b.w3_fleet)
        b.step("w3-fleet pooled peer", lambda: b.w3_fleet_peer("pool"))
    if failed(b):
        return 1
    v = b.values
    rows = [{"nnfleet_1_worker_s": v["w3.wall1.nnfleet"][i], "nnfleet_s": v["w3.wall.nnfleet"][i],
             "pooled_peer_s": v["w3.wall.pool"][i]} for i in range(rounds)]
    for r in rows:
        print(json.dumps(r))
    med = {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
    med["scaling"] = round(med["nnfleet_1_worker_s"] / med["nnfleet_s"], 2)
    med["pooled_peer_ratio"] = round(med["pooled_peer_s"] / med["nnfleet_s"], 2)
    print(json.dumps({"median": med, "rounds": rounds, "workers": b.n, "work": b.work}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--nnfleet")
    ap.add_argument("--one-core", action="store_true",
                    help="the 1-core rows (samples/s of each model) instead of the fleet's")
    ap.add_argument("--w3", action="store_true",
                    help="W3's rows (its makespan against the pooled peer, its scaling) instead")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds: expected at least 1")
    b = run_bench.Bench(argparse.Namespace(quick=False, rounds=a.rounds, build=a.build,
                                           nnfleet=a.nnfleet, profiler="none", md=None))
    b.preflight()
    if a.one_core and a.w3:
        ap.error("--one-core and --w3: expected one of them")
    if a.one_core:
        return one_core(b, a.rounds)
    if a.w3:
        return w3(b, a.rounds)
    for b.round in range(1, a.rounds + 1):
        b.step("w1-fleet nnfleet", b.w1_fleet)
        b.step("w1-fleet peer", b.w1_fleet_peer)
    if failed(b):
        return 1
    v = b.values
    rounds = [{"nnfleet_wall_s": v["w1.wall.nnfleet"][i], "peer_wall_s": v["w1.wall.peer"][i],
               "nnfleet_rss_mb": v["w1.rss.nnfleet"][i] / 1e6,
               "peer_rss_sum_mb": v["w1.rss.peer"][i] / 1e6,
               "nnfleet_launch_s": v["w1.launch.nnfleet"][i]} for i in range(a.rounds)]
    for r in rounds:
        print(json.dumps(r))
    med = {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
    med["makespan_ratio"] = round(med["peer_wall_s"] / med["nnfleet_wall_s"], 2)
    med["memory_ratio"] = round(med["peer_rss_sum_mb"] / med["nnfleet_rss_mb"], 2)
    print(json.dumps({"median": med, "rounds": a.rounds, "work": b.work}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
