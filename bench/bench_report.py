#!/usr/bin/python3
"""Renders one run of bench/run_bench.py as BENCHMARKS.md, from that run's raw results only.

  bench/bench_report.py RAW.json [--md PATH]     re-render a saved run without re-measuring

BENCHMARKS.md holds one section per machine kind (CPU vendor, family and model, e.g. `amd-f26-m2`,
"AMD Zen 5 (family 26, model 2)": bench_probe.machine_kind), each written whole by one full run on
a machine of that kind and stamped with that run's machine, commit and date. A run replaces its
own kind's section (and a section restored from before kinds were recorded that names the same
microarchitecture, bench_probe.superseded_keys) and keeps the others byte for byte, in their
order, a new kind's section appended after them; hand-written text after the last section is kept
too. Files from before (sections keyed by instruction set, `isa=AVX2`) are migrated on the next
merge: their sections are kept under `isa-<name>` keys, since their kind was not recorded. A
--quick run writes its own file (BUILD/bench/BENCHMARKS-quick.md) and never BENCHMARKS.md.

"% peak" everywhere (W1, W2, W3, W4, the kernel microbenchmarks) divides by the fp32 peak this
run's FMA probe measured (bench/fma_probe.c: the best vector width's GFLOP/s on one core, times
the cores used); a run from before the probe falls back to 32 FLOP/cycle x the measured clock and
says so.

Every figure of a section comes from the raw results it is rendered from (raw.json: medians over
the rounds, the machine as probed when the run started, the profiles it recorded of the scenarios
whose targets it missed). Text written here carries no measured figures: what varies is computed,
and the hand-written remedies (REMEDIES) name no numbers. A figure the run could not measure is
written as missing, with the reason.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
import bench_probe  # noqa: E402
import workloads  # noqa: E402

MB = 1e6
# workloads.md "The limit": two 256-bit FMA pipes. Only for runs from before the FMA probe
# (bench/fma_probe.c), which measures each machine's own.
ASSUMED_FLOP_PER_CYCLE = 32
BEGIN = "<!-- bench-section kind={} begin -->"
END = "<!-- bench-section kind={} end -->"
# kind= sections, and isa= ones of files from before kinds (migrated by split_sections).
SECTION_RE = re.compile(r"<!-- bench-section (kind|isa)=(\S+) begin -->\n(.*?)"
                        r"<!-- bench-section \1=\2 end -->\n", re.S)
METHOD_HEADING = "## How each figure is measured"
# Issue 14 raised m7's to 2.5x (and kept m2, m3, m6, m8 at 2x); m1, m4, m5 as before.
W1_TARGETS = {"m1": 4, "m2": 2, "m3": 2, "m4": 4, "m5": 4, "m6": 2, "m7": 2.5, "m8": 2}

# What would close the gap of a missed target, by the profiled scenario (see scenario keys in
# target_rows). Hand-written, so it must not carry figures: the profile above it, recorded by
# the same run, says where the time goes.
REMEDIES = {
    "w1-conv1": "a direct convolution kernel for single-channel inputs (no im2col at all, or "
                "at least the forward pass's im2col kept for the kernel gradient instead of "
                "made again), fused with the activation and the pooling, forward and backward, "
                "so that each image is read once per step.",
    "w1-conv": "the rest of the step around the Winograd GEMMs (F(4x4,3x3) forward on both "
               "instruction sets, and for the input gradient where the build has the wider "
               "vectors): the per-step zeroing "
               "of the parameter gradients folded into the optimizer's pass, which reads them "
               "anyway; the kernel gradient as F(4x4,3x3); the transforms' loads prefetched a "
               "block ahead.",
    "w1-mlp": "fewer passes over the activations: fuse the bias, the activation and its "
              "gradient into the GEMMs' epilogues.",
    "w1-fleet": "balance the tail: more pieces per batch for the longest model, and fewer "
                "serial steps per batch (loss, hand-offs, the optimizer update).",
    "w1-launch": "the data is read and inflated once, into huge-page memory; what is left runs "
                 "one after the other: the training images' inflate, then the test set's, then "
                 "the files' hashes and the first model's set-up. Overlap them on the idle cores.",
    "tiny-fleet": "less JSON per model: a job's expansion of its model without the checks and "
                  "the expanded text the plan's load already made, config.json's remaining "
                  "object-built parts as text, the record of a finished model as text.",
    "w1-memory": "the peak is two models training at once over the shared training and test "
                 "images: m7's arena (its parameters, the Adam state, one gradient copy per "
                 "batch piece and each piece's activations) is the largest part, then the "
                 "other model's arena and the libraries' code. Next: a fused layer's "
                 "pre-activation gradient written over its own output gradient instead of into "
                 "scratch, dropout masks as bytes, and a finished model's file streamed out "
                 "rather than built whole in memory (the HDF5 builder's copy and libhdf5's "
                 "image exist together at a save).",
    "w2-b256": "the Winograd transforms: the forward runs F(4x4,3x3), whose input and output "
               "transforms wait on L2 and L3; transform a block of tiles with the "
               "next block prefetched, and fuse the ReLU and the 2x2 max pooling into the output "
               "transform so that the layer's output never leaves the cache.",
    "w2-b1": "keep the transformed Winograd kernel from call to call and run the first "
             "convolution without its im2col copy; the Dense layer's weight traffic is the same "
             "for every fp32 engine.",
    "w3-fleet": "the Adam update bounds it (the section W3 packed weighs its cost per parameter "
                "against a step's products at peak): beyond packing every layer of a pack (one "
                "arena, block-diagonal deeper layers, the loss and one Adam loop over all "
                "members) it needs a cheaper exact update; packing only the first layer measured "
                "slower (the W3 packed table).",
    "many-models": "results.json and results.csv streamed from jobs.log with a compact row per "
                   "model in memory, one validation per distinct architecture, a grid's plan "
                   "written unexpanded, per-model text cut to what --resume needs.",
    "w4-fleet": "batch the recurrent products of every time step into one GEMM per gate block, "
                "and keep the gate activations of the whole sequence for the backward pass.",
    "w5-search": "the cores are already busy through the rungs (the run's busy fraction is "
                 "in its run.json): the trials are CNN epochs bound by their own compute, so the "
                 "gap is per-epoch speed against PyTorch's oneDNN on small 'same'-padded "
                 "convolutions of few channels, where the im2col gather and "
                 "the pooling backward, vectorized across channels, fill a fraction of a vector: "
                 "an im2col-free (implicit GEMM) Conv2D and a pooling backward vectorized across "
                 "pixels for such layers, and trials that share their data and batch order "
                 "trained as one wider product.",
    "w5-pruning": "compare where the two searches pruned: each trial's rung values in "
                  "results.json against the values the peer reported at the same epochs; a "
                  "ranking that follows the noise of the first epoch stops good trials early.",
}
SCENARIOS = {  # what each profile key runs (bench_probe.py builds the commands)
    "w1-fleet": "W1 on all cores (`nnfleet train`, every model)",
    "w1-launch": "launch to first step: `nnfleet train` of m1 alone (loading the data, then m1)",
    "w1-memory": "W1 on all cores, heap at its peak",
    "w2-b256": "`nnfleet predict` of m7 at batch 256, one worker",
    "w2-b1": "`nnfleet predict` of m7 at batch 1, one worker",
    "w3-fleet": "W3 on all cores (`nnfleet train`)",
    "w4-fleet": "W4 on all cores (`nnfleet train examples/forecast.yaml`)",
    "many-models": "bench/many_models.py's fleet of 100,000 tiny models on digits, all cores",
    "tiny-fleet": "a fleet of tiny models on all cores (`nnfleet train` of bench/tiny_overhead.py's "
                  "plan)",
    "w5-search": "W5's search on all cores (`nnfleet train examples/search/w5.yaml`)",
    "w5-pruning": "W5's pruning: which trials the search kept, and their accuracy",
}
# Scenarios whose targets are not about time or memory: a profile would not explain a miss.
UNPROFILED = {"w5-pruning": "an accuracy or epoch-count target, which a profile does not explain",
              "many-models": "memory and bytes held or written per model, which the section "
                             "'100,000 models in one run' breaks down by file and structure"}


class Run:
    """One run's raw results (raw.json) as attributes."""

    def __init__(self, raw):
        self.__dict__.update(raw)
        self.n = len(self.cores)
        self.profiles = raw.get("profiles") or {}
        self.failures = [tuple(f) for f in raw.get("failures", [])]
        self.kernels_avx2 = raw.get("kernels_avx2")  # runs from before it existed have none
        # Runs from before kinds were recorded: keyed by their instruction set, as they were.
        self.kind = self.machine.get("kind") or legacy_kind(self.machine.get("isa", "unknown"))


def legacy_kind(isa):
    """The kind of a section (or run) recorded before kinds were: only its instruction set."""
    slug = re.sub(r"[^a-z0-9]+", "-", isa.lower()).strip("-")
    return {"key": f"isa-{slug}", "title": f"{isa} machine (kind not recorded)", "isa": isa,
            "vendor": None, "family": None, "model": None, "name": None}


def load(path):
    with open(path) as f:
        return Run(json.load(f))


def med(b, key):
    xs = sorted(x for x in b.values.get(key, []) if x is not None)
    if not xs:
        return None
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


def div(a, b):
    return a / b if a is not None and b else None


def f_int(v):
    return "missing" if v is None else f"{v:,.0f}"


def f_sec(v):
    return "missing" if v is None else (f"{v:.3f} s" if v < 10 else f"{v:.1f} s")


def f_mb(v):
    return "missing" if v is None else f"{v / MB:,.0f} MB"


def f_ms(v):
    return "missing" if v is None else f"{v * 1e3:.3f} ms"


def f_x(v):
    return "—" if v is None else f"{v:.2f}x"


def f_pct(v):
    return "—" if v is None else f"{100 * v:.0f}%"


def f_share(v):
    return f"{100 * v:.1f}%"


def f_mse(v):
    return "missing" if v is None else f"{v:.4g}"


def f_acc(v):
    return "missing" if v is None else f"{v:.4f}"


def f_pt(v):
    """A difference of accuracies (fractions) in percentage points."""
    return "—" if v is None else f"{100 * v:+.2f} pt"


def pts(a, b):
    return a - b if a is not None and b is not None else None


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


class Ctx:
    """Figures derived once: the ceiling and FLOP counts."""

    def __init__(self, b):
        self.b = b
        self.sgemm = med(b, "sgemm.openblas") or max(
            (v for v in (med(b, "sgemm.torch"), med(b, "sgemm.numpy")) if v), default=None)
        self.sgemm_src = ("OpenBLAS cblas_sgemm" if med(b, "sgemm.openblas")
                          else "the best of torch.mm and numpy (no OpenBLAS)")
        self.clock = med(b, "clock.probe_mhz")
        self.fma = fma_widths(b)
        if self.fma:  # the probe's best width, GFLOP/s on one core as measured (not x the clock)
            self.peak_bits = max(self.fma, key=lambda w: self.fma[w]["gflops"])
            self.peak = self.fma[self.peak_bits]["gflops"]
            self.peak_src = (f"the FMA probe's best width, {self.peak_bits}-bit, in GFLOP/s as "
                             "measured on one core (bench/fma_probe.c)")
        else:
            self.peak_bits = None
            self.peak = ASSUMED_FLOP_PER_CYCLE * self.clock / 1000 if self.clock else None
            self.peak_src = (f"{ASSUMED_FLOP_PER_CYCLE} FLOP/cycle assumed x the measured clock; "
                             "not probed (the run predates bench/fma_probe.c)")
        self.w1_flops = {m: workloads.train_flops_per_sample(workloads.w1_spec(m))
                         for m in b.w1_models}
        self.w1_total = sum(self.w1_flops.values()) * b.n_train
        self.w3_total = sum(workloads.train_flops_per_sample(j) * workloads.W3_TRAIN * j["epochs"]
                            for j in b.w3_jobs)
        self.m7_fwd = workloads.spec_stats(workloads.w1_spec("m7"))[1]

    def peak_fraction(self, gflops, cores=1):
        """gflops as a fraction of the fp32 peak of `cores` cores (None where either is missing).
        A new row's "% peak" (a packed W3, a fleet of 100,000 models) is f_pct(this)."""
        return div(gflops, self.peak * cores if self.peak else None)

    def gf(self, gflops, cores=1):
        """'G GFLOP/s (x% sgemm, y% peak)' for a rate on `cores` cores."""
        if gflops is None:
            return "—"
        parts = [f"{f_pct(div(gflops, self.sgemm * cores if self.sgemm else None))} sgemm"]
        if self.peak:
            parts.append(f"{f_pct(self.peak_fraction(gflops, cores))} peak")
        return f"{gflops:.1f} ({', '.join(parts)})"


def fma_widths(b):
    """{bits: {gflops, flop_per_cycle, clock_mhz, isa}} of the FMA probe (medians over the rounds
    of each width's best core); {} for a run without it."""
    out = {}
    for key in b.values:
        m = re.fullmatch(r"fma\.gflops\.(\d+)", key)
        if m and med(b, key):
            bits = int(m.group(1))
            out[bits] = {"gflops": med(b, key),
                         "flop_per_cycle": med(b, f"fma.flop_per_cycle.{bits}"),
                         "clock_mhz": med(b, f"fma.clock_mhz.{bits}"),
                         "isa": b.info.get(f"fma.isa.{bits}", "?")}
    return dict(sorted(out.items()))


def w1_scenario(m):
    """The profile key of W1 model m's one-core figure: m alone on one core."""
    return f"w1-1core-{m}"


def w1_model_of(scenario):
    """The W1 model a 'w1-1core-<m>' profile key names, else None."""
    m = scenario[len("w1-1core-"):] if scenario.startswith("w1-1core-") else None
    return m if m in workloads.W1_MODELS else None


def remedy_key(scenario):
    """REMEDIES' key for a profile key (the W1 models share theirs by kind)."""
    if w1_model_of(scenario):
        layers = workloads.W1_MODELS[w1_model_of(scenario)]
        if layers[0][0] != "conv":
            return "w1-mlp"
        return "w1-conv1" if len(layers) <= 4 else "w1-conv"
    return scenario


def scenario_text(scenario):
    if w1_model_of(scenario):
        return f"W1 {w1_model_of(scenario)} alone on one core (`nnfleet train --workers 1`)"
    return SCENARIOS.get(scenario, scenario)


def target_rows(b, c=None):
    """One dict per target: label, the figures as text, met (True/False/None), the compared
    value `have` against the threshold `need` (unit 'x' ratios or 's' seconds), and the scenario
    a profile of it runs."""
    c = c or Ctx(b)
    rows = []

    def row(label, n, p, fmt, ratio, target, have, need, unit, scenario, ngf="—", pgf="—"):
        # unit: "x" a ratio at least need, "s" a time under need, "pt" a difference of
        # accuracies at least need, "share" a fraction at most need, "frac" a fraction at least
        # need, "mb" megabytes under need.
        # ratio: a number shown as "1.23x", or the text to show.
        ok = None if have is None else (have < need if unit in ("s", "mb") else have <= need
                                        if unit == "share" else have >= need)
        rows.append({"label": label, "n": fmt(n), "p": fmt(p),
                     "ratio": ratio if isinstance(ratio, str) else f_x(ratio),
                     "target": target, "met": ok, "ngf": ngf, "pgf": pgf, "have": have,
                     "need": need, "unit": unit, "scenario": scenario})

    for m in b.w1_models:
        t = W1_TARGETS[m]
        n, p = med(b, f"w1.sps.{m}.nnfleet"), med(b, f"w1.sps.{m}.peer")
        r = div(n, p)
        fl = c.w1_flops[m] / 1e9
        row(f"W1 {m} training samples/s, 1 core", n, p, f_int, r, f"≥ {t}x", r, t, "x",
            w1_scenario(m), c.gf(n and n * fl), c.gf(p and p * fl))
    n, p = med(b, "w1.wall.nnfleet"), med(b, "w1.wall.peer")
    r = div(p, n)
    row(f"W1 makespan, {b.n} cores (launch to last model done)", n, p, f_sec, r, "≥ 3x faster",
        r, 3, "x", "w1-fleet", c.gf(div(c.w1_total / 1e9, n), b.n),
        c.gf(div(c.w1_total / 1e9, p), b.n))
    ns = div(med(b, "w1.wall1.nnfleet"), n)
    ps = div(med(b, "w1.wall1.peer"), p)
    row(f"W1 scaling, {b.n} workers vs 1 (makespan ratio)", ns, ps, f_x, None, "nnfleet ≥ 1.85x",
        ns, 1.85, "x", "w1-fleet")
    n, p = med(b, "w1.launch.nnfleet"), med(b, "w1.launch.peer")
    row("W1 launch to first training step (Fashion-MNIST .gz)", n, p, f_sec, div(p, n),
        "nnfleet < 0.5 s", n, 0.5, "s", "w1-launch")
    n, p = med(b, "w1.rss.nnfleet"), med(b, "w1.rss.peer")
    r = div(p, n)
    row(f"W1 peak resident memory, whole run on {b.n} cores", n, p, f_mb, r, "≥ 8x less", r, 8,
        "x", "w1-memory")
    fl = c.m7_fwd / 1e9
    n, p = med(b, "w2.b256.nnfleet"), med(b, "w2.best.peer")
    r = div(n, p)
    bb = med(b, "w2.best_batch.peer")
    row("W2 m7 predict, batch 256, 1 core vs PyTorch at its best batch"
        + (f" ({bb:.0f})" if bb else ""), n, p, f_int, r, "≥ 2x", r, 2, "x", "w2-b256",
        c.gf(n and n * fl), c.gf(p and p * fl))
    p = med(b, "w2.b256.ort")
    r = div(n, p)
    row("W2 m7 predict, batch 256, 1 core vs ONNX Runtime (1 thread)", n, p, f_int, r, "≥ 1.3x",
        r, 1.3, "x", "w2-b256", c.gf(n and n * fl), c.gf(p and p * fl))
    n = med(b, "w2.b1.nnfleet")
    for key, peer in (("w2.b1.peer", "PyTorch"), ("w2.b1.ort", "ONNX Runtime (1 thread)")):
        p = med(b, key)
        r = div(n, p)
        t = 3 if peer == "PyTorch" else 1
        row(f"W2 m7 predict, batch 1, 1 core vs {peer}", n, p, f_int, r, f"≥ {t}x", r, t, "x",
            "w2-b1", c.gf(n and n * fl), c.gf(p and p * fl))
    n = med(b, "w3.wall.nnfleet")
    for mode, label, t in (("fresh", "the recipe (fresh process per model)", 50),
                           ("pool", "the pooled peer (long-lived workers)", 20)):
        p = med(b, f"w3.wall.{mode}")
        r = div(p, n)
        row(f"W3 makespan, {b.n} cores vs {label}", n, p, f_sec, r, f"≥ {t}x faster", r, t, "x",
            "w3-fleet", c.gf(div(c.w3_total / 1e9, n), b.n), c.gf(div(c.w3_total / 1e9, p), b.n))
    ns = div(med(b, "w3.wall1.nnfleet"), n)
    row(f"W3 scaling, {b.n} workers vs 1 (makespan ratio)", ns, None, f_x, None,
        "nnfleet ≥ 1.85x", ns, 1.85, "x", "w3-fleet")
    n = med(b, "tiny.overhead.nnfleet")
    models = getattr(b, "tiny_models", None)  # runs before it was measured have none
    row("Tiny models: overhead per model" + (f" ({models:,} models)" if models else "")
        + f" on {b.n} cores", n, None, f_ms, None, "nnfleet < 0.3 ms", n, 0.0003, "s",
        "tiny-fleet")
    n = med(b, "w3.wall.nnfleet")
    frac = c.peak_fraction(div(c.w3_total / 1e9, n), b.n)
    row(f"W3 on {b.n} cores, fraction of the fp32 peak (probed)", frac, None, f_pct, None,
        "nnfleet ≥ 60%", frac, 0.6, "frac", "w3-fleet")
    many_target_rows(b, row)
    w4_target_rows(b, c, row)
    w5_target_rows(b, row)
    return rows


def many_target_rows(b, row):
    """Issue 36's 100,000 models in one run (bench/many_models.py, once per run): at most 5% of
    the wall time outside training, peak memory within 10% of the small run's, under 50 MB
    written with the default save policy."""
    counts = getattr(b, "many_models", None) or []
    if len(counts) != 2 or med(b, f"many.{counts[1]}.wall_s") is None:
        return
    small, big = counts
    k = lambda n, key: med(b, f"many.{n}.{key}")  # noqa: E731
    out = k(big, "outside_training")
    row(f"{big:,} tiny models on {b.n} cores: wall time outside training", out, None, f_pct,
        None, "≤ 5%", out, 0.05, "share", "many-models")
    rb, rs = k(big, "peak_rss_mb"), k(small, "peak_rss_mb")
    r = div(rb, rs)
    row(f"{big:,} tiny models: peak memory against {small:,}", rb and rb * MB, rs and rs * MB,
        f_mb, r, "≤ 1.1x", r, 1.1, "share", "many-models")
    w = k(big, "bytes_written")
    row(f"{big:,} tiny models: bytes left in the output folder (default save policy)", w, None,
        lambda v: "—" if v is None else f_mb(v), None, "< 50 MB", w and w / MB, 50, "mb", "many-models")


def w4_target_rows(b, c, row):
    """W4's targets (issue 11): each architecture 3x the peer's single-core samples/s, the
    makespan 3x the pooled peer's, test MSE within 10% of the peer's."""
    for arch in workloads.W4_ARCHS:
        n, p = med(b, f"w4.sps.{arch}.nnfleet"), med(b, f"w4.sps.{arch}.peer")
        r = div(n, p)
        fl = workloads.w4_train_flops_per_sample(arch) / 1e9
        row(f"W4 {arch} training samples/s, 1 core", n, p, f_int, r, "≥ 3x", r, 3, "x",
            "w4-fleet", c.gf(n and n * fl), c.gf(p and p * fl))
    n, p = med(b, "w4.wall.nnfleet"), med(b, "w4.wall.pool")
    r = div(p, n)
    row(f"W4 makespan, {b.n} cores vs the pooled peer", n, p, f_sec, r, "≥ 3x faster", r, 3, "x",
        "w4-fleet")
    for arch in workloads.W4_ARCHS:
        n, p = med(b, f"w4.mse.{arch}.nnfleet"), med(b, f"w4.mse.{arch}.peer")
        # peer ÷ nnfleet, as for times: at least 1/1.1 when nnfleet's MSE is within 10% above.
        r = div(p, n)
        row(f"W4 {arch} mean test MSE", n, p, f_mse, r, "within 10% (≥ 0.91x)", r, 0.91, "x",
            "w4-fleet")


def w5_target_rows(b, row):
    """W5's targets (issue 33): the search at least 10x faster than the Optuna peer, its best
    trial's test accuracy at most 0.5 point below the peer's; pruning trains at most 40% of the
    unpruned run's epochs with a best validation accuracy within 0.5 point of the unpruned one's.
    The last two compare nnfleet with itself: their peer column is the unpruned run."""
    trials = (getattr(b, "w5", None) or {}).get("trials", workloads.W5_TRIALS)
    n, p = med(b, "w5.wall.nnfleet"), med(b, "w5.wall.peer")
    r = div(p, n)
    row(f"W5 search of {trials} trials, {b.n} cores vs Optuna (wall time)", n, p, f_sec, r,
        "≥ 10x faster", r, 10, "x", "w5-search")
    n, p = med(b, "w5.best_test.nnfleet"), med(b, "w5.best_test.peer")
    d = pts(n, p)
    row("W5 best trial's test accuracy vs Optuna's", n, p, f_acc, f_pt(d), "≥ peer − 0.5 pt", d,
        -0.005, "pt", "w5-pruning")
    n, p = med(b, "w5.epochs_trained.nnfleet"), med(b, "w5.epochs_trained.unpruned")
    share = div(n, p)
    row("W5 epochs trained, pruned (peer column: the same search unpruned)", n, p, f_int,
        f_pct(share), "≤ 40% of unpruned", share, 0.4, "share", "w5-pruning")
    n, p = med(b, "w5.best_val.nnfleet"), med(b, "w5.best_val.unpruned")
    d = pts(n, p)
    row("W5 best validation accuracy, pruned (peer column: unpruned)", n, p, f_acc, f_pt(d),
        "≥ unpruned − 0.5 pt", d, -0.005, "pt", "w5-pruning")


def missed_scenarios(b):
    """The profile keys of the targets this run missed, in target order (each once)."""
    out = []
    for r in target_rows(b):
        if r["met"] is False and r["scenario"] not in out:
            out.append(r["scenario"])
    return out


def gap_text(r):
    if r["unit"] == "s":
        # Limits under a tenth of a second (the tiny models' overhead) read in milliseconds.
        scale, unit = (1e3, "ms") if r["need"] < 0.1 else (1, "s")
        have, need = r["have"] * scale, r["need"] * scale
        return f"{have:.3f} {unit} against < {need:g} {unit} ({have - need:.3f} {unit} over)"
    if r["unit"] == "pt":
        short = 100 * (r["need"] - r["have"])
        return f"{f_pt(r['have'])} against ≥ {f_pt(r['need'])} ({short:.2f} pt short)"
    if r["unit"] == "share":
        return f"{f_pct(r['have'])} against ≤ {f_pct(r['need'])}"
    if r["unit"] == "frac":
        return f"{f_pct(r['have'])} against ≥ {f_pct(r['need'])}"
    if r["unit"] == "mb":
        return f"{r['have']:,.0f} MB against < {r['need']:g} MB"
    more = f"{f_pct(r['need'] / r['have'] - 1)} more needed" if r["have"] else "none measured"
    return f"{r['have']:.2f}x against ≥ {r['need']}x ({more})"


def profile_lines(p):
    """A recorded profile as Markdown: how it was recorded, then its top symbols."""
    if not p:
        return ["No profile was recorded for this scenario (the run stopped before it)."]
    if p.get("skipped"):
        return [f"Not profiled: {p['skipped']}."]
    why = "chosen by --profiler" if p.get("forced") else "`perf` counts no instructions here"
    how = {"perf": "`perf record` (cycles sampled, or the cpu-clock where the machine counts no "
                   "cycles), share of the samples",
           "callgrind": f"callgrind ({why}), share of the instructions executed (Ir), which is "
                        "not a share of the time",
           "massif": "valgrind massif, share of the heap at its peak by allocation site",
           "smaps": "the process's memory map (/proc/PID/smaps) at its highest resident sample "
                    "(valgrind cannot run this build), share of the resident set by mapping"}
    L = [f"Profile: {how.get(p.get('tool'), p.get('tool'))}"
         + (f", on a reduced run ({p['reduced']})" if p.get("reduced") else "")
         + (f"; command: `{p['command']}`" if p.get("command") else "") + "."]
    if p.get("error"):
        L.append(f"The profile failed: {p['error']}")
        return L
    if p.get("total_text"):
        L.append(f"Total: {p['total_text']}.")
    top = p.get("top") or []
    if not top:
        L.append("The profile lists no symbols.")
        return L
    L.append("")
    L.append(table(["symbol", "object", "share"],
                   [(f"`{s[:110]}`", o or "?", f_share(sh)) for s, o, sh in top]))
    return L


def missed_section(b, rows):
    """For every target missed: its gap, the profile this run recorded of its scenario, and a
    hand-written remedy (no figures)."""
    missed = [r for r in rows if r["met"] is False]
    if not missed:
        return "Every target with a measured figure is met.\n"
    L = ["### Targets missed: the gap, the profile, what would close it\n",
         "Gaps and profiles are this run's own; each profile was recorded by this run after its "
         "rounds, of the scenario behind the target. The remedy lines are hand-written and carry "
         "no figures.\n"]
    for scen in dict.fromkeys(r["scenario"] for r in missed):
        L.append(f"#### {scenario_text(scen)}\n")
        for r in (r for r in missed if r["scenario"] == scen):
            L.append(f"- **{r['label']}**: nnfleet {r['n']}, peer {r['p']}; {gap_text(r)}.")
        L.append("")
        L += profile_lines(b.profiles.get(scen))
        L.append("")
        L.append(f"What would close it: {REMEDIES.get(remedy_key(scen), 'not analysed yet.')}\n")
    return "\n".join(L)


def kernel_rows(b, c):
    """(kernel, samples/s, GFLOP/s, % of the single-core fp32 peak) per kernels_bench run, and
    where kernels_bench_avx2 ran, its samples/s and the native build's ratio to it."""
    avx2 = {k["name"]: k.get("samples_per_second") for k in b.kernels_avx2 or []}
    rows = []
    for k in b.kernels or []:
        sps, fps = k.get("samples_per_second"), k.get("flops_per_second")
        g = None if fps is None else fps / 1e9
        row = (f"`{k['name']}`", f_int(sps),
               "missing" if g is None else (f"{g:.1f}" if g >= 1 else f"{g:.2f}"),
               f_pct(div(g, c.peak)))
        if b.kernels_avx2:
            a = avx2.get(k["name"])
            ratio = div(sps, a)
            row += (f_int(a) if a is not None else "missing",
                    f"{ratio:.2f}x" if ratio is not None else "—")
        rows.append(row)
    return rows


def kernel_section(b, c):
    """The "Kernel microbenchmarks" part: bench/kernels/kernels_bench's table and command."""
    L = ["### Kernel microbenchmarks\n"]
    core = b.kernels_core
    L.append("`bench/kernels/kernels_bench` (Google Benchmark): each layer's kernel, forward and "
             "backward, on W1's shapes (benchmark arguments: Dense in/out, Conv2D and pooling "
             "input height = width h, channels c, filters f; dx:0 is a first layer's backward, "
             "without the input gradient), run once after the rounds"
             + (f", pinned to core {core}" if core is not None else "") + ". samples/s: batch "
             "rows per second. GFLOP/s: a multiply-add counts 2; pooling and activations do no "
             "multiply-adds and count one FLOP per element visited. % peak: of the single-core "
             f"fp32 peak ({c.peak_src}"
             + (f", {c.peak:.1f} GFLOP/s" if c.peak else ", missing") + "). Dropout and Flatten "
             "have no kernel of their own.\n")
    if b.kernels_avx2:
        L.append("This CPU has AVX-512, so `bench/kernels/kernels_bench_avx2` ran the same "
                 "benchmarks on the AVX2-only machines' path (the kernels built for AVX2 + FMA, "
                 "libxsmm's and oneDNN's JITs held to AVX2) on the same core: its samples/s and "
                 "the native build's ratio to it are the last two columns.\n")
    rows = kernel_rows(b, c)
    if rows:
        head = ["kernel", "samples/s", "GFLOP/s", "% peak"]
        if b.kernels_avx2:
            head += ["samples/s, AVX2 path", "native ÷ AVX2 path"]
        L.append(table(head, rows))
        L.append("")
    else:
        why = (b.unavailable or {}).get("kernels") or next(
            (msg for _, s, msg in b.failures if s == "kernels"), None)
        L.append(f"missing: {why or 'kernels_bench did not run'}\n")
    for label in ("kernels-bench", "kernels-bench-avx2"):
        cmd = (b.commands or {}).get(label)
        if cmd:
            L.append(f"Command: `{cmd}`\n")
    return L


def provenance(b):
    mi = b.machine
    return (f"Measured by `bench/run_bench.py` ({b.mode} mode, {b.rounds} interleaved round(s)) "
            f"on {b.started}, nnfleet commit {mi['commit']}, on {b.kind['title']}: {mi['cpu']} "
            f"({mi['isa']}; "
            f"hypervisor: {mi['hypervisor']}). Run time: {b.elapsed / 60:.1f} min. Every figure "
            "in this section is the median over that run's rounds, and every ratio the ratio of "
            "two such medians. Raw results: `" + b.raw_path + "` (re-render without measuring: "
            "`bench/bench_report.py " + b.raw_path + "`).\n")


def machine_part(b, c):
    mi = b.machine
    L = ["### Machine\n"]
    loads = ", ".join(f"round {r}: {a:.1f} → {z:.1f}" for r, a, z in b.loads)
    L.append(table(["", ""], [
        ("CPU", f"{mi['cpu']} ({mi['flags']}; hypervisor: {mi['hypervisor']})"),
        ("CPU kind (this section's key)", kind_text(b.kind)),
        ("cores", mi["cores"]),
        ("clock", (f"{mi['nominal_mhz']:.0f} MHz nominal (/proc/cpuinfo); "
                   if mi.get("nominal_mhz") else "nominal clock unknown; ")
         + (f"{c.clock:.0f} MHz measured on a busy core (bench/clock_probe.c, median of the "
            "rounds' best core)" if c.clock else "measured clock missing")),
        ("caches", mi["caches"] + (f"; from {mi['caches_source']}"
                                   if mi.get("caches_source") else "")),
        ("fp32 peak per core (FMA probe, bench/fma_probe.c)", probe_text(c)),
        ("memory", f"{mi['mem'] / 2**30:.1f} GiB" if mi.get("mem") else "?"),
        ("system", mi["os"]),
        ("load average (1 min) before → after each round", loads or "—"),
        ("nnfleet", f"{b.version}, commit {mi['commit']}, `{b.nnfleet}`"),
        ("PyTorch peer", f"torch {b.info.get('torch', '?')} (Debian python3-torch), numpy "
                         f"{b.info.get('numpy', '?')}; BLAS loaded by the peer: "
                         f"{b.info.get('peer_blas', '?')}"),
        ("peer's kernels (bench/peers/peer_kernels.py, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE "
         "unset)", b.info.get("peer_kernels", "not recorded by this run")),
        ("ONNX Runtime peer", f"onnxruntime-node {b.info.get('ort', 'missing')} on Node.js "
                              f"{mi.get('node') or 'missing'}"),
    ]))
    L.append("")
    return L


def kind_text(kind):
    if kind.get("family") is None:
        return f"{kind['title']} (`{kind['key']}`)"
    return (f"{kind['title']}: vendor {kind['vendor']}, family {kind['family']} "
            f"(0x{kind['family']:x}), model {kind['model']} (0x{kind['model']:x}), widest ISA "
            f"{kind['isa']} (`{kind['key']}`)")


def probe_text(c):
    if not c.fma:
        return f"not probed ({c.peak_src})"
    return "; ".join(f"{bits}-bit {w['isa']}: {w['gflops']:.1f} GFLOP/s, "
                     + (f"{w['flop_per_cycle']:.1f} FLOP/cycle" if w["flop_per_cycle"]
                        else "FLOP/cycle missing") for bits, w in c.fma.items())


def ceiling_rows(b, c):
    """The ceiling table's rows: sgemm, then the probed peak per vector width (or the assumed
    one of a run from before the probe), per core and for the machine."""
    mi = b.machine
    sg = lambda k: f"{med(b, k):.1f} GFLOP/s" if med(b, k) else "missing"  # noqa: E731
    rows = [("sgemm 512x512x512, one thread, OpenBLAS `cblas_sgemm`", sg("sgemm.openblas")),
            ("the same through `torch.mm` (the peer's BLAS)", sg("sgemm.torch")),
            ("the same through numpy `matmul`", sg("sgemm.numpy"))]
    for bits, w in c.fma.items():
        rows.append((f"FMA probe, {bits}-bit ({w['isa']}), one core: GFLOP/s, FLOP/cycle (÷ the "
                     "clock the probe measured just before"
                     + (f", {w['clock_mhz']:.0f} MHz" if w["clock_mhz"] else "") + ")",
                     f"{w['gflops']:.1f} GFLOP/s, " + (f"{w['flop_per_cycle']:.1f} FLOP/cycle"
                                                       if w["flop_per_cycle"] else "missing")))
    fpc = c.fma[c.peak_bits]["flop_per_cycle"] if c.fma else ASSUMED_FLOP_PER_CYCLE
    label = (f"single-core fp32 peak: the probe's best width ({c.peak_bits}-bit)" if c.fma else
             f"single-core fp32 peak: {ASSUMED_FLOP_PER_CYCLE} FLOP/cycle x measured clock "
             "(assumed; not probed)")
    rows += [(label, f"{c.peak:.1f} GFLOP/s" if c.peak else "missing"),
             (f"machine fp32 peak: the same x {b.n} cores used",
              f"{c.peak * b.n:.1f} GFLOP/s" if c.peak else "missing"),
             ("single-core peak at the nominal clock"
              + (f" ({fpc:.1f} FLOP/cycle)" if c.fma and fpc else ""),
              f"{fpc * mi['nominal_mhz'] / 1000:.1f} GFLOP/s"
              if mi.get("nominal_mhz") and fpc else "missing")]
    return rows


def ceiling_part(b, c):
    mi = b.machine
    L = ["### The ceiling\n"]
    L.append(table(["figure", "value"], ceiling_rows(b, c)))
    if 512 in c.fma and 256 in c.fma:
        L.append(f"\nThis CPU has AVX-512: 512-bit FMAs run "
                 f"{c.fma[512]['gflops'] / c.fma[256]['gflops']:.2f}x the 256-bit rate here (about "
                 "2x where the core has full-width 512-bit units, about 1x where it splits them "
                 "in two). OpenBLAS here runs "
                 f"{b.info.get('openblas', 'its detected kernels')}.")
    elif mi["isa"] == "AVX-512":
        L.append(f"\nThis CPU has AVX-512; the run predates the FMA probe, so its "
                 f"{ASSUMED_FLOP_PER_CYCLE} FLOP/cycle peak is the AVX2 figure (two 256-bit FMA "
                 "pipes), which 512-bit kernels can go past.")
    L.append(f"\nGFLOP/s columns: training FLOPs = 3 x forward FLOPs of Dense and Conv2D (a "
             f"multiply-add counts 2), prediction = 1 x forward. \"% sgemm\" divides by "
             f"{c.sgemm_src} x the cores used, \"% peak\" by the single-core fp32 peak "
             f"({c.peak_src}) x the cores used. The 3x convention also counts the input gradient "
             "of the first layer, which no trainer computes, so for the MLPs (whose first Dense "
             "layer dominates) the FLOPs actually done are fewer than counted, and their implied "
             "GFLOP/s can exceed the sgemm rate.\n")
    return L


def w1_part(b, c):
    L = ["### W1: the heterogeneous fleet\n"]
    rows = []
    for m in b.w1_models:
        fl = c.w1_flops[m]
        n, p = med(b, f"w1.sps.{m}.nnfleet"), med(b, f"w1.sps.{m}.peer")
        rows.append((m, f"{fl / 1e6:.2f}", b.info.get(f"params.{m}.nnfleet", "?"), f_int(n),
                     c.gf(n and n * fl / 1e9), f_int(p), c.gf(p and p * fl / 1e9),
                     f_x(div(n, p)), f_acc(med(b, f"w1.acc.{m}.nnfleet")),
                     f_acc(med(b, f"w1.acc.{m}.peer"))))
    L.append(table(["model", "train MFLOP/sample", "params", "nnfleet samples/s",
                    "nnfleet GFLOP/s", "peer samples/s", "peer GFLOP/s", "ratio",
                    "nnfleet test acc.", "peer test acc."], rows))
    launches = [v for v in b.values.get("w1.launch.peer.all", []) if v is not None]
    share_n, share_p = med(b, "w1.m7share.nnfleet"), med(b, "w1.m7share.peer")
    L.append("\nOne core: `nnfleet train --workers 1` (samples/s from results.json: training "
             "samples ÷ the epoch's seconds) against one fresh pinned PyTorch process per model, "
             "run one after the other on the same core (samples/s over its training loop).\n")
    L.append(table(["figure", "nnfleet", "peer"], [
        (f"makespan on {b.n} cores", f_sec(med(b, "w1.wall.nnfleet")),
         f_sec(med(b, "w1.wall.peer"))),
        ("makespan on 1 core", f_sec(med(b, "w1.wall1.nnfleet")), f_sec(med(b, "w1.wall1.peer"))),
        (f"m7's time in the {b.n}-core run", f_sec(med(b, "w1.m7.nnfleet")),
         f_sec(med(b, "w1.m7.peer"))),
        (f"m7's share of the {b.n}-core makespan", f_pct(share_n), f_pct(share_p)),
        ("nnfleet's internal makespan (after the data is loaded)",
         f_sec(med(b, "w1.makespan_internal.nnfleet")), "—"),
        (f"peak resident memory, {b.n} cores", f_mb(med(b, "w1.rss.nnfleet")),
         f"{f_mb(med(b, 'w1.rss.peer'))} (sampled sum; ≤ {f_mb(med(b, 'w1.rss_bound.peer'))})"),
        ("peak resident memory, 1 core", f_mb(med(b, "w1.rss1.nnfleet")), "—"),
        ("launch to first training step", f_sec(med(b, "w1.launch.nnfleet")),
         f"{f_sec(med(b, 'w1.launch.peer'))} (range {f_sec(min(launches, default=None))} to "
         f"{f_sec(max(launches, default=None))})"),
    ]))
    if "m7" in c.w1_flops:
        work_share = c.w1_flops["m7"] / sum(c.w1_flops.values())
        per_batch = c.w1_flops["m7"] * workloads.w1_spec("m7")["batch_size"] / 1e9
        L.append(f"\nm7 is {100 * work_share:.0f}% of this W1's training FLOPs. With one model per "
                 "core (the peer's recipe) no schedule can make W1's makespan shorter than m7 "
                 f"alone on one core: the makespan is at least max(m7, total/{b.n}), which caps "
                 f"the {b.n}-vs-1 scaling at about {1 / max(work_share, 1 / b.n):.2f}x. nnfleet "
                 f"lifts that cap without giving up bit-identical results: m7 has {per_batch:.1f} "
                 "GFLOP of training work per batch, so its batches are split into fixed pieces "
                 "(`batch_split`, README \"Idle cores help the last models\") with their own "
                 "activations, gradients and dropout streams; a worker without a model of its own "
                 "computes whichever piece is free, the gradients are summed in piece order and "
                 "the optimizer update is shared out by parameter range.\n")
    return L


def w2_part(b, c):
    L = ["### W2: m7 prediction with per-sample loss\n"]
    rows = []
    fl = c.m7_fwd / 1e9
    for label, nk, tk, ok, cores in [
            ("batch 1, 1 core", "w2.b1.nnfleet", "w2.b1.peer", "w2.b1.ort", 1),
            ("batch 32, 1 core", None, "w2.torch_b32.peer", None, 1),
            ("batch 256, 1 core", "w2.b256.nnfleet", "w2.torch_b256.peer", "w2.b256.ort", 1),
            (f"batch 256, {b.n} cores", "w2.b256-all.nnfleet", "w2.b256-all.peer", None, b.n)]:
        n = med(b, nk) if nk else None
        t = med(b, tk)
        o = med(b, ok) if ok else None
        rows.append((label, f_int(n) if nk else "—", c.gf(n and n * fl, cores), f_int(t),
                     c.gf(t and t * fl, cores), f_int(o) if ok else "—",
                     c.gf(o and o * fl, cores) if ok else "—"))
    rows.append(("model load", f_sec(med(b, "w2.load.nnfleet")), "", f_sec(med(b, "w2.load.peer")),
                 "", f_sec(med(b, "w2.load.ort")), ""))
    L.append(table(["samples/s", "nnfleet", "GFLOP/s", "PyTorch", "GFLOP/s", "ONNX Runtime",
                    "GFLOP/s"], rows))
    L.append(f"\nm7 after 1 epoch of W1 (each side's own: nnfleet's models/m7 file, the peer's "
             f"state_dict exported to ONNX), predicting Fashion-MNIST's {b.n_train:,} training "
             f"images with their per-sample cross-entropy; batch 1 on the first {b.w2_b1:,} "
             f"images only (a rate). Forward pass: {c.m7_fwd / 1e6:.1f} MFLOP/sample. Mean loss "
             f"at batch 256: PyTorch {b.info.get('w2.torch_loss', 'missing')}, ONNX Runtime "
             f"{b.info.get('w2.ort_loss', 'missing')} (the same model, so they must agree).\n")
    return L


def w3_part(b, c):
    L = ["### W3: many tiny models\n"]
    bests = lambda k: ", ".join(sorted(set(b.info.get(k, [])))) or "missing"  # noqa: E731
    gfr = lambda k: c.gf(div(c.w3_total / 1e9, med(b, k)), b.n)  # noqa: E731
    L.append(table(["figure", "nnfleet", "peer recipe (fresh process per model)",
                    "pooled peer (long-lived workers)"], [
        (f"makespan, {b.n} cores", f_sec(med(b, "w3.wall.nnfleet")),
         f_sec(med(b, "w3.wall.fresh")), f_sec(med(b, "w3.wall.pool"))),
        ("makespan, 1 core", f_sec(med(b, "w3.wall1.nnfleet")), "—", "—"),
        ("GFLOP/s (whole run)", gfr("w3.wall.nnfleet"), gfr("w3.wall.fresh"),
         gfr("w3.wall.pool")),
        ("mean time per model", f_sec(med(b, "w3.mean_model.nnfleet")) + " (training)",
         f_sec(med(b, "w3.mean_model.fresh")) + " (process) / "
         + f_sec(med(b, "w3.mean_train.fresh")) + " (training)",
         f_sec(med(b, "w3.mean_train.pool")) + " (training)"),
        ("best test accuracy", f_acc(med(b, "w3.best_acc.nnfleet")),
         f_acc(med(b, "w3.best_acc.fresh")), f_acc(med(b, "w3.best_acc.pool"))),
        ("its configuration", bests("w3.best.nnfleet"), bests("w3.best.fresh"),
         bests("w3.best.pool")),
        (f"peak resident memory, {b.n} cores", f_mb(med(b, "w3.rss.nnfleet")),
         f_mb(med(b, "w3.rss.fresh")), f_mb(med(b, "w3.rss.pool"))),
    ]))
    L.append(f"\n{len(b.w3_jobs)} MLPs, {c.w3_total / 1e9:.2f} training GFLOP in all.\n")
    return L


def many_part(b):
    counts = getattr(b, "many_models", None) or []
    if not counts or med(b, f"many.{counts[-1]}.wall_s") is None:
        return []
    L = ["### Many tiny models in one run (bench/many_models.py)\n"]
    k = lambda n, key: med(b, f"many.{n}.{key}")  # noqa: E731
    L.append(table(["models", "wall", "training (summed over models)", "outside training",
                    "peak resident memory", "left on disk", "files"], [
        (f"{n:,}", f_sec(k(n, "wall_s")), f_sec(k(n, "train_sum_s")),
         f_pct(k(n, "outside_training")), f_mb(k(n, "peak_rss_mb") and k(n, "peak_rss_mb") * MB),
         f_mb(k(n, "bytes_written")), f_int(k(n, "files_written"))) for n in counts]))
    L.append("\nDense(8, relu), Dense(10, softmax), 1 epoch, Adam, on W3's digits, all cores, the "
             "default save policy; outside training = (wall - summed training / workers) / wall.\n")
    return L


def w3_pack_part(b):
    keys = sorted(k for k in b.values if k.startswith("w3pack.cpu."))
    if not keys:
        return []
    cfg = getattr(b, "w3_pack", None) or {}
    paths = sorted({k.split(".")[3] for k in keys}, key=lambda p: (p != "alone", len(p), p))
    rows = []
    for batch in sorted({int(k.split(".")[2]) for k in keys}):
        alone = med(b, f"w3pack.cpu.{batch}.alone")
        for p in paths:
            v = med(b, f"w3pack.cpu.{batch}.{p}")
            rows.append((str(batch), p, "—" if v is None else f"{v:.1f}",
                         f_x(div(v, alone)) if p != "alone" else "—"))
    L = ["### W3 packed against unpacked (bench/model/w3_pack_bench)\n"]
    L.append(table(["batch", "path", "GFLOP/s (CPU time, 1 thread)", "packed ÷ alone"], rows))
    L.append(f"\nW3's 60 models of each batch size for {cfg.get('epochs', '?')} epochs on one "
             f"pinned core, {cfg.get('rounds', '?')} interleaved round(s), one model at a time "
             "(alone) or in packs of k whose first Dense layers run as one product (bit-identical "
             "to alone, tests/model/dense_pack_test.cpp).\n")
    return L


def w4_part(b, c):
    w4 = getattr(b, "w4", None) or {}
    series, epochs = w4.get("series", workloads.W4_SERIES), w4.get("epochs", workloads.W4_EPOCHS)
    L = ["### W4: one small model per series\n"]
    rows = []
    for arch in workloads.W4_ARCHS:
        rows.append((f"{arch} training samples/s, 1 core", f_int(med(b, f"w4.sps.{arch}.nnfleet")),
                     f_int(med(b, f"w4.sps.{arch}.peer")),
                     f_int(med(b, f"w4.sps_pool.{arch}.peer"))))
    for arch in workloads.W4_ARCHS:
        rows.append((f"{arch} mean test MSE", f_mse(med(b, f"w4.mse.{arch}.nnfleet")), "—",
                     f_mse(med(b, f"w4.mse.{arch}.peer"))))
    rows.append((f"makespan, {b.n} cores", f_sec(med(b, "w4.wall.nnfleet")), "—",
                 f_sec(med(b, "w4.wall.pool"))))
    rows.append((f"peak resident memory, {b.n} cores", f_mb(med(b, "w4.rss.nnfleet")), "—", "—"))
    L.append(table(["figure", "nnfleet", "peer, one core (series 5 alone)",
                    "pooled peer (long-lived workers)"], rows))
    L.append(f"\n{series} series x {len(workloads.W4_ARCHS)} architectures, {epochs} epoch(s) "
             "each; the peer ran once in this run, not in every round (its models take minutes "
             "each). The pooled peer's samples/s are each model's own while the other core "
             "trained too.\n")
    return L


def w5_same_text(b, side):
    s = b.info.get(f"w5.same.{side}")
    if not s:
        return "missing"
    return "yes" if s["same"] else f"no ({s.get('difference') or 'the trials differ'})"


def w5_part(b):
    w5 = getattr(b, "w5", None) or {}
    trials, epochs = w5.get("trials", workloads.W5_TRIALS), w5.get("max_epochs",
                                                                   workloads.W5_MAX_EPOCHS)
    peer = w5.get("peer") or {"trials": trials, "train": workloads.W5_TRAIN,
                              "val": workloads.W5_VAL, "test": workloads.W5_TEST}
    sides = ("nnfleet", "unpruned", "peer")

    def all_epochs(side):
        """The side's epochs as a share of every trial trained to the last epoch."""
        e, t = med(b, f"w5.epochs_trained.{side}"), med(b, f"w5.trials.{side}")
        return f"{f_int(e)} ({f_pct(div(e, t and t * epochs))})" if e is not None else "missing"

    def names(side):
        return ", ".join(sorted(set(b.info.get(f"w5.best.{side}", [])))) or "missing"

    L = ["### W5: a hyper-parameter search with pruning\n"]
    L.append(table(["figure", "nnfleet", "nnfleet unpruned", "Optuna peer"], [
        (f"wall time, {b.n} cores", *(f_sec(med(b, f"w5.wall.{s}")) for s in sides)),
        ("wall time, 1 worker", f_sec(med(b, "w5.wall1.nnfleet")), "—",
         f_sec(med(b, "w5.wall1.peer"))),
        (f"epochs trained (share of every trial for {epochs})", *map(all_epochs, sides)),
        ("trials pruned", *(f"{f_int(med(b, f'w5.pruned.{s}'))} of "
                            f"{f_int(med(b, f'w5.trials.{s}'))}"
                            if med(b, f"w5.trials.{s}") is not None else "missing"
                            for s in sides)),
        ("best trial's validation accuracy", *(f_acc(med(b, f"w5.best_val.{s}")) for s in sides)),
        ("best trial's test accuracy", *(f_acc(med(b, f"w5.best_test.{s}")) for s in sides)),
        ("the best trial", *map(names, sides)),
        (f"same study with 1 worker and {b.n}", w5_same_text(b, "nnfleet"), "—",
         w5_same_text(b, "peer")),
    ]))
    L.append(f"\n{trials} trials drawn from W5's space, successive halving (reduction factor 3, "
             f"1 to {epochs} epochs), ranked by validation accuracy. nnfleet: "
             "`examples/search/w5.yaml` on all cores in every round, then once on 1 worker and "
             f"once unpruned (its scheduler rewritten to `none` over {epochs} epochs). The peer, "
             f"once: Optuna {b.info.get('optuna', '(missing)')} with PyTorch objectives "
             f"(`bench/peers/optuna_w5.py`), {b.n} pinned single-thread workers sharing one "
             "study in a journal file, RandomSampler and SuccessiveHalvingPruner, on the first "
             f"{peer['train']:,} training images, the next {peer['val']:,} to validate and "
             f"{peer['test']:,} test images; then 1 worker. \"Same study\": the same trials "
             "(parameters, pruned or not, every reported value) with 1 worker as with all "
             "cores.\n")
    return L


def rounds_part(b):
    L = ["### Every figure, round by round\n"]
    rows = [(f"`{k}`", ", ".join("—" if v is None else f"{v:.4g}" for v in b.values[k]))
            for k in sorted(b.values)]
    L.append(table(["figure", "rounds"], rows))
    L.append("")
    L.append("### Commands\n")
    L.append("Everything runs from the repository's root. Inside a round (work folder "
             f"`{b.work}`, logs in its `logs/`):\n")
    L.append("```sh")
    for label, cmd in b.commands.items():
        L.append(f"# {label}\n{cmd}")
    L.append("```\n")
    if b.unavailable or b.failures:
        L.append("### Missing\n")
        for s, why in b.unavailable.items():
            L.append(f"- **{s}**: not available: {why}")
        for r, s, msg in b.failures:
            L.append(f"- **{s}** (round {r}): failed: {msg}")
        L.append("")
    return L


def section_heading(kind, isa):
    """A section's heading before its machine, commit and date: the kind and the widest ISA."""
    return f"{kind['title']}, {isa}"


def render_section(b):
    """This run's section, without its markers: heading, provenance, every table."""
    c = Ctx(b)
    mi = b.machine
    L = [f"## {section_heading(b.kind, mi['isa'])}: {mi['cpu']}, commit {mi['commit']}, "
         f"{b.started}\n"]
    if b.mode == "quick":
        L.append("> **Quick run** (`bench/run_bench.py --quick`): the benchmark's structure on "
                 f"reduced work (W1 with {', '.join(b.w1_models)} on the first {b.n_train:,} "
                 f"training and {b.n_test:,} test images, W3 on {len(b.w3_jobs)} models for "
                 f"{b.w3_jobs[0]['epochs']} epochs, W2 on {b.n_train:,} images, W5 with "
                 f"{(getattr(b, 'w5', None) or {}).get('trials', 'its')} trials). It proves the "
                 "harness; its figures are not the benchmark's.\n")
    L.append(provenance(b))
    L += machine_part(b, c)
    L += ceiling_part(b, c)
    L.append("### Targets\n")
    rows = target_rows(b, c)
    met = {True: "yes", False: "**no**", None: "missing"}
    L.append(table(["figure", "nnfleet", "peer", "ratio", "target", "met?", "nnfleet GFLOP/s",
                    "peer GFLOP/s"],
                   [(r["label"], r["n"], r["p"], r["ratio"], r["target"], met[r["met"]],
                     r["ngf"], r["pgf"]) for r in rows]))
    L.append("\nRatios: for rates nnfleet ÷ peer; for times and memory peer ÷ nnfleet (how many "
             "times faster or smaller nnfleet is).\n")
    L.append(missed_section(b, rows))
    L += w1_part(b, c)
    L += w2_part(b, c)
    L += w3_part(b, c)
    L += w3_pack_part(b)
    L += many_part(b)
    L += w4_part(b, c)
    L += w5_part(b)
    L += kernel_section(b, c)
    L += rounds_part(b)
    return "\n".join(L)


HEADER = """# Benchmarks

nnfleet against its peers on the workloads of `/work/shared/workloads.md` (W1:
`examples/w1.yaml`; W3: `examples/w3.yaml`; W4: `examples/forecast.yaml`; W5:
`examples/search/w5.yaml`), written by `make bench` (`bench/run_bench.py`, which
`bench/README.md` describes). There is one section per machine kind (CPU vendor, family and
model, e.g. AMD Zen 5 = family 26, model 2), each written whole by one full run on a machine of
that kind and headed by that run's machine, commit and date: a run replaces only its own kind's
section and keeps the others as they were. Every figure in a section was measured by the run that
wrote it; "% peak" divides by the fp32 peak that run's FMA probe measured on one core
(`bench/fma_probe.c`, the best vector width) times the cores used, or, in a section from before
the probe, by an assumed 32 FLOP/cycle at the measured clock (such sections say "not probed").
`make bench ARGS=--quick` never writes this file.
"""

METHOD = """## How each figure is measured

- **Interleaving.** Each round runs the scenarios in order (sgemm; W1 one core; W1 all
  cores; W2; W3 one core; W3 all cores), nnfleet first and then its peers, so slow drifts of the
  machine hit both sides alike. Medians over the rounds; the spread is in "Every figure".
- **The peer** (`bench/peers/`) is the recipe of workloads.md with Debian's PyTorch: one process
  per model (`torch_peer.py`), pinned with `os.sched_setaffinity`, `torch.set_num_threads(1)`,
  `OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1`, Keras initialisation (glorot_uniform, zero biases),
  Adam with the Keras epsilon, batches gathered from a shuffled permutation of in-memory tensors,
  the data loaded from the Debian .gz files inside each process; at most one process per core,
  longest model first (`torch_fleet.py --mode fresh`). The pooled peer (`--mode pool`) keeps one
  long-lived pinned worker per core that imports torch and loads the data once. Debian's
  libtorch recommends OpenBLAS as its BLAS; the bench gives the peer processes Debian's
  libopenblas0-pthread through `LD_LIBRARY_PATH` (installed, or unpacked by
  `bench/setup_peers.sh`), so the peer is not left on the netlib reference BLAS that an install
  without recommends gets. The BLAS it loaded is named under Machine.
- **Samples/s, one core.** nnfleet: `results.json` `samples_per_second` of `--workers 1`
  (training samples ÷ the epoch's seconds). Peer: training samples ÷ its training loop's
  seconds, one fresh process per model on the same core.
- **Makespans** are wall-clock from spawning the command to the end of the last model: for
  nnfleet from `Popen` to the arrival of its `run_end` JSON event (so process start, data load
  and the writing of results count), for the peer from the first process spawned to the last
  process exited.
- **Launch to first training step.** nnfleet: from `Popen` to the arrival on the pipe of the
  first `first_step` event of `--json` (older builds: the first `start`). Peer: each process
  notes `time.time()` just before its first batch, against the launcher's spawn time passed on
  its command line; median over the W1 one-core processes.
- **Peak resident memory.** nnfleet: `peak_rss_bytes` of the `run_end` event (the process's
  maximum RSS). Peer: the peak of the summed RSS of all its live processes, sampled with psutil
  (`torch_fleet.py`; an upper bound, the sum over cores of each core's largest process peak, is
  given beside it).
- **W2.** nnfleet: `nnfleet predict` on the model file `nnfleet train` wrote, reading the same
  .gz files with `--scale 1/255`; the samples/s and load time it prints on stderr. PyTorch:
  `torch_predict.py` (one pinned thread; its best batch size is the peer's figure; for all cores
  one process per core on its share of the images, total samples ÷ the slowest process's loop).
  ONNX Runtime: `ort_predict.js` (onnxruntime-node, one intra- and inter-op thread, sequential),
  pinned with taskset, on the peer's m7 exported by `export_m7_onnx.py`. Each times its
  prediction loop only, after a warm-up batch.
- **The ceiling.** `bench/sgemm_rate.py`: a single-thread sgemm on one pinned thread, best of
  its timed runs, operands hot; `bench/clock_probe.c`: a chain of dependent adds (one per cycle)
  gives the clock a busy core really runs at (best core); `bench/fma_probe.c`: independent FMAs
  (12 to 16 accumulator chains, enough to hide the FMA latency on both pipes) at each vector width
  the CPU has, pinned to each core, compiled per width with target attributes so that one binary
  runs everywhere and calls a width only where cpuid says the CPU has it; the best width's GFLOP/s
  is the single-core fp32 peak of "% peak", and its FLOP/cycle divides by the clock the probe
  measured just before on the same core. All three count the thread's CPU time, not
  the wall clock, so other processes sharing a core do not lower the ceiling; nnfleet's and the
  peers' figures are wall-clock, so a busy machine (see the load averages under Machine) lowers
  their fractions, never raises them.
- **Profiles of missed targets.** After the rounds, the run records a profile of each scenario
  behind a missed target (`bench/bench_probe.py`): `perf record` where `perf stat -e
  instructions` counts on this machine, else callgrind on a reduced run (shares of the
  instructions executed); for memory, valgrind massif on a reduced run (shares of the heap at its
  peak). The top symbols and their shares are printed with the target's own figures.
- **W5.** nnfleet: wall-clock from `Popen` to its `run_end` event; epochs, the pruned trials and
  the best trial (by the search's metric, finished trials only) from `results.json`'s `search`
  object and its trials' `status`, `metrics` and `rungs`. Peer (`bench/peers/optuna_w5.py`):
  from spawning its pinned workers to the last one's exit (each imports torch, loads the data and
  trains trials until the study holds them all). A trial's torch seed comes from its number;
  each worker's RandomSampler is seeded with the seed plus the worker's index (with one seed, N
  processes would draw the same configurations). A run's fingerprint (per trial: parameters,
  pruned or finished, every reported value) decides "same study".
"""


def split_sections(text):
    """{kind key: the section's text between its markers}, in the file's order, of an existing
    BENCHMARKS.md. A section of a file from before kinds (`isa=AVX2` markers) is kept under the
    key `isa-avx2` (legacy_kind): its kind was not recorded."""
    out = {}
    for m in SECTION_RE.finditer(text):
        key = m.group(2) if m.group(1) == "kind" else legacy_kind(m.group(2))["key"]
        out[key] = m.group(3)
    return out


# A placeholder the generator wrote for an instruction set never measured (before kinds).
PLACEHOLDER_RE = re.compile(r"## \S+\n\nNot measured yet: run `make bench` on a machine with "
                            r"\S+ to fill this section\.\n\n?")


def extra_text(text):
    """Hand-written text between the last section and "How each figure is measured" (a one-off
    measurement, such as issue 34's tiny models from Python), kept by a merge as it is."""
    ends = [m.end() for m in SECTION_RE.finditer(text)]
    if not ends:
        return ""
    tail = text[ends[-1]:]
    cut = tail.find(METHOD_HEADING)
    tail = PLACEHOLDER_RE.sub("", tail if cut < 0 else tail[:cut])
    return tail.strip("\n") + "\n" if tail.strip() else ""


def assemble(sections, extra=""):
    """The whole BENCHMARKS.md from {kind key: section text} (in their order), then `extra`."""
    L = [HEADER]
    for key, text in sections.items():
        L.append(BEGIN.format(key) + "\n" + text + END.format(key) + "\n")
    if extra:
        L.append(extra)
    L.append(METHOD)
    return "\n".join(L)


def section_text(b):
    """Run b's section between its markers, ending in one newline."""
    return render_section(b).rstrip("\n") + "\n"


def merge(existing, b):
    """BENCHMARKS.md's text after run b: its kind's section replaced where it was (a new kind's
    appended), every other section kept byte for byte, the hand-written text after them kept."""
    sections = split_sections(existing) if existing else {}
    if existing and not sections and existing.strip():
        raise ValueError("failed to merge into BENCHMARKS.md: it has no per-kind sections; "
                         f"expected '{BEGIN.format('<kind>')}' markers, got none (restore it "
                         "from git, or pass --md to write elsewhere)")
    key, old = b.kind["key"], set(bench_probe.superseded_keys(b.kind)) - {b.kind["key"]}
    kept = {}
    for k, text in sections.items():
        if k in old:  # a restored section of this microarchitecture: this run takes its place
            kept.setdefault(key, None)
        else:
            kept[k] = text
    kept[key] = section_text(b)  # in its place, or appended
    return assemble(kept, extra_text(existing or ""))


def render(b):
    """A standalone report of run b (the --quick report, or a first BENCHMARKS.md)."""
    return assemble({b.kind["key"]: section_text(b)})


def is_benchmarks_md(path):
    return os.path.realpath(path) == os.path.realpath(os.path.join(REPO, "BENCHMARKS.md"))


def write(b, md):
    """Writes run b's report to md atomically: BENCHMARKS.md is merged (full runs only), any
    other path gets a standalone report."""
    if is_benchmarks_md(md):
        if b.mode != "full":
            raise ValueError(f"failed to write {md}: a {b.mode} run never writes BENCHMARKS.md; "
                             "expected a full run, got --quick (its report goes to "
                             "BUILD/bench/BENCHMARKS-quick.md)")
        existing = open(md).read() if os.path.exists(md) else ""
        text = merge(existing, b)
    else:
        text = render(b)
    tmp = f"{md}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, md)


def main():
    ap = argparse.ArgumentParser(description="Re-render a saved bench run (raw.json) as Markdown.")
    ap.add_argument("raw", help="BUILD/bench/<mode>-<time>/raw.json of a run")
    ap.add_argument("--md", help="where to write (default: BENCHMARKS.md for a full run, "
                                 "BUILD/bench/BENCHMARKS-quick.md next to a quick run's folder)")
    a = ap.parse_args()
    b = load(a.raw)
    md = a.md or (os.path.join(REPO, "BENCHMARKS.md") if b.mode == "full" else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(a.raw))), "BENCHMARKS-quick.md"))
    try:
        write(b, md)
    except ValueError as e:
        sys.exit(f"bench_report: {e}")
    print(f"bench_report: wrote {md} from {a.raw}")


if __name__ == "__main__":
    main()
