"""bench/bench_report.py renders only what the raw results it is given say (issue 16).

Synthetic raw results (the shape bench/run_bench.py saves in raw.json) are made here from a seed;
two different seeds are two different runs. Run by CTest: /usr/bin/python3 -m pytest.
"""
import json
import os
import random
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import bench_probe  # noqa: E402
import bench_report  # noqa: E402
import workloads  # noqa: E402

MODELS = list(workloads.W1_MODELS)
# Each figure's order of magnitude; a run's value is this times a random factor.
BASE = {"sgemm.openblas": 100, "sgemm.torch": 100, "sgemm.numpy": 100, "clock.probe_mhz": 3500,
        "w1.launch.nnfleet": 0.3, "w1.wall1.nnfleet": 40, "w1.rss1.nnfleet": 1.4e8,
        "w1.launch.peer": 1, "w1.wall1.peer": 80, "w1.wall.nnfleet": 20,
        "w1.makespan_internal.nnfleet": 19, "w1.rss.nnfleet": 1.5e8, "w1.m7.nnfleet": 19,
        "w1.m7share.nnfleet": 0.9, "w1.wall.peer": 50, "w1.rss.peer": 1.1e9,
        "w1.rss_bound.peer": 1.5e9, "w1.m7.peer": 49, "w1.m7share.peer": 0.97,
        "w2.b1.nnfleet": 5000, "w2.b256.nnfleet": 8000, "w2.b256-all.nnfleet": 16000,
        "w2.load.nnfleet": 0.04, "w2.torch_b1.peer": 1800, "w2.torch_b32.peer": 4400,
        "w2.torch_b256.peer": 2000, "w2.b1.peer": 1800, "w2.best.peer": 4400,
        "w2.load.peer": 0.012, "w2.b256-all.peer": 4300, "w2.b1.ort": 6000, "w2.b256.ort": 8800,
        "w2.load.ort": 0.025, "w3.wall1.nnfleet": 2.2, "w3.wall.nnfleet": 1.2,
        "w3.rss.nnfleet": 3.6e7, "w3.mean_model.nnfleet": 0.015, "w3.wall.fresh": 78,
        "w3.wall.pool": 23, "w3.rss.fresh": 5e8, "w3.rss.pool": 5e8, "w3.mean_model.fresh": 1.3,
        "w3.mean_train.fresh": 0.37, "w3.mean_train.pool": 0.37,
        "tiny.overhead.nnfleet": 0.0003}
for _a, _r, _e in (("lstm", 1400, 0.011), ("gru", 1800, 0.004), ("tcn", 11500, 0.02)):
    BASE[f"w4.sps.{_a}.nnfleet"] = 3.5 * _r
    BASE[f"w4.sps.{_a}.peer"] = _r
    BASE[f"w4.sps_pool.{_a}.peer"] = 0.9 * _r
    BASE[f"w4.mse.{_a}.nnfleet"] = _e
    BASE[f"w4.mse.{_a}.peer"] = _e
BASE.update({"w4.wall.nnfleet": 200, "w4.wall.pool": 720, "w4.rss.nnfleet": 6e7})
# The FMA probe (bench/fma_probe.c) per vector width: GFLOP/s, FLOP/cycle, its clock.
for _bits, _g in ((128, 55), (256, 110), (512, 220)):
    BASE.update({f"fma.gflops.{_bits}": _g, f"fma.flop_per_cycle.{_bits}": _g / 3.5,
                 f"fma.clock_mhz.{_bits}": 3500})
BASE.update({"w5.wall.nnfleet": 40, "w5.wall.unpruned": 110, "w5.wall.peer": 900,
             "w5.wall1.nnfleet": 75, "w5.wall1.peer": 1700, "w5.epochs_trained.nnfleet": 243,
             "w5.epochs_trained.unpruned": 729, "w5.epochs_trained.peer": 300,
             "w5.pruned.nnfleet": 72, "w5.pruned.unpruned": 0.01, "w5.pruned.peer": 60,
             "w5.trials.nnfleet": 81, "w5.trials.unpruned": 81, "w5.trials.peer": 81})
for _m, _r in zip(MODELS, (7e5, 2e5, 1e5, 4e5, 8e4, 3e4, 1900, 3.7e4)):
    BASE[f"w1.sps.{_m}.nnfleet"] = _r
    BASE[f"w1.sps.{_m}.peer"] = _r / 2.5


KINDS = {"AVX2": ("AuthenticAMD", 25, 1), "AVX-512": ("AuthenticAMD", 26, 2)}


def make_raw(seed, isa="AVX2", mode="full", family_model=None):
    """A complete synthetic raw.json of a 3-round run, every figure drawn from `seed`, on a
    machine of the kind (vendor_id, family, model) given, by default a Zen 3 for AVX2 and a Zen 5
    for AVX-512; the FMA probe's 512-bit width only with AVX-512."""
    rng = random.Random(seed)
    fig = lambda base: base * rng.uniform(0.5, 2.0)  # noqa: E731
    values = {k: [fig(v) for _ in range(3)] for k, v in BASE.items()
              if isa == "AVX-512" or not k.startswith("fma.") or not k.endswith(".512")}
    for m in MODELS:
        values[f"w1.acc.{m}.nnfleet"] = [rng.uniform(0.8, 0.9)] * 3
        values[f"w1.acc.{m}.peer"] = [rng.uniform(0.8, 0.9)] * 3
        values[f"w1.fleet_acc.{m}.nnfleet"] = values[f"w1.acc.{m}.nnfleet"]
    for k in ("w3.best_acc.nnfleet", "w3.best_acc.fresh", "w3.best_acc.pool"):
        values[k] = [rng.uniform(0.9, 0.95)] * 3
    for k in ("best_val", "best_test"):
        for side in ("nnfleet", "unpruned", "peer"):
            values[f"w5.{k}.{side}"] = [rng.uniform(0.85, 0.9)] * 3
    values["w1.launch.peer.all"] = [fig(1) for _ in range(24)]
    values["w2.best_batch.peer"] = [32, 32, 32]
    jobs = workloads.w3_specs()
    info = {"torch": "1.13.0a0", "numpy": "1.24.2", "peer_blas": "libopenblas.so",
            "openblas": "OpenBLAS (kernel Haswell)", "ort": "1.30.0",
            "w2.torch_loss": rng.uniform(0.2, 0.4), "w2.ort_loss": rng.uniform(0.2, 0.4),
            "w3.best.nnfleet": [jobs[rng.randrange(len(jobs))]["name"]],
            "w3.best.fresh": [jobs[rng.randrange(len(jobs))]["name"]],
            "w3.best.pool": [jobs[rng.randrange(len(jobs))]["name"]],
            "w5.best.nnfleet": [f"trial-{rng.randrange(81):02d}"],
            "w5.best.unpruned": [f"trial-{rng.randrange(81):02d}"],
            "w5.best.peer": [f"trial {rng.randrange(81)}"], "optuna": "3.1.0",
            "w5.same.nnfleet": {"same": True, "difference": None},
            "w5.same.peer": {"same": False, "difference": "trial 0: params, values"}}
    for m in MODELS:
        info[f"params.{m}.nnfleet"] = workloads.spec_stats(workloads.w1_spec(m))[0]
    for bits in (128, 256, 512):
        info[f"fma.isa.{bits}"] = ("AVX-512F" if bits == 512 else "FMA") + ", 12 chains"
    kernels = [{"name": f"BM_DenseForward/in:784/out:{u}", "samples_per_second": fig(1e6),
                "flops_per_second": fig(2e11)} for u in (32, 128, 512)]
    raw = {"mode": mode, "rounds": 3, "started": f"2030-01-{seed % 28 + 1:02d} 10:00:00 UTC",
           "elapsed": fig(1500), "cores": [0, 1],
           "machine": {"cpu": "Test CPU", "isa": isa,
                       "kind": bench_probe.machine_kind(*(family_model or KINDS[isa]), isa),
                       "flags": "AVX2, FMA", "cores": "2 used",
                       "nominal_mhz": fig(2600), "caches": "L1d 64 KiB", "mem": fig(2.4e10),
                       "os": "Debian", "hypervisor": "none", "commit": f"c{seed:06x}",
                       "node": "v20"},
           "version": "nnfleet 0.1.0", "nnfleet": "build/nnfleet",
           "work": f"build/bench/full-{seed}", "raw_path": f"build/bench/full-{seed}/raw.json",
           "w1_models": MODELS, "n_train": 60000, "n_test": 10000, "w2_b1": 10000,
           "w3_jobs": jobs, "tiny_models": 8000, "values": values, "info": info, "unavailable": {}, "failures": [],
           "commands": {"nnfleet-w1-1core": "build/nnfleet train examples/w1.yaml --workers 1"},
           "loads": [[r, fig(1), fig(1)] for r in (1, 2, 3)], "kernels": kernels,
           "kernels_core": 0, "profiles": {}}
    run = bench_report.Run(raw)
    for scen in bench_report.missed_scenarios(run):
        shares = sorted((rng.uniform(0.01, 0.3) for _ in range(4)), reverse=True)
        raw["profiles"][scen] = {"tool": "callgrind", "command": f"valgrind {scen}",
                                 "reduced": f"the first {rng.randrange(300, 9000):,} images",
                                 "total_text": f"{rng.randrange(10**9, 10**11):,} instructions",
                                 "top": [[f"fn_{scen}_{i}", "nnfleet", round(s, 4)]
                                         for i, s in enumerate(shares)]}
    return raw


NUM = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[+-]\d+)?")


def figures(text):
    """The numbers of a report with at least 4 significant digits (shorter ones, such as
    percentages and ratios, recur by chance between unrelated runs)."""
    out = set()
    for tok in NUM.findall(text):
        digits = re.sub(r"e[+-]\d+$", "", tok).replace(",", "").replace(".", "").lstrip("0")
        if len(digits) >= 4:
            out.add(tok)
    return out


def render(raw):
    return bench_report.render(bench_report.Run(raw))


def perturbed(raw, seed):
    """raw with every measured figure moved by its own 1-3%, so ratios move too."""
    rng = random.Random(seed)
    out = json.loads(json.dumps(raw))
    for vs in out["values"].values():
        vs[:] = [v * rng.uniform(1.01, 1.03) for v in vs]
    for k in out["kernels"]:
        k["samples_per_second"] *= rng.uniform(1.01, 1.03)
        k["flops_per_second"] *= rng.uniform(1.01, 1.03)
    for p in out["profiles"].values():
        p["top"] = [[s, o, v * rng.uniform(1.01, 1.03)] for s, o, v in p["top"]]
        p["total_text"] = f"{rng.randrange(10**9, 10**11):,} instructions"
        p["reduced"] = f"the first {rng.randrange(300, 9000):,} images"
    for k in ("w2.torch_loss", "w2.ort_loss"):
        out["info"][k] *= rng.uniform(1.01, 1.03)
    out["machine"]["nominal_mhz"] *= rng.uniform(1.01, 1.03)
    out["machine"]["mem"] *= rng.uniform(1.01, 1.03)
    out["elapsed"] *= rng.uniform(1.01, 1.03)
    out["loads"] = [[r, a * rng.uniform(1.01, 1.03), z * rng.uniform(1.01, 1.03)]
                    for r, a, z in out["loads"]]
    return out


def fixed_figures(text, raw):
    """The figures of a report (text) of raw that do not follow raw's measurements: they stay
    when the measurements move (three ways, so that a chance coincidence does not count)."""
    out = figures(text)
    for seed in (97, 98, 99):
        out &= figures(render(perturbed(raw, seed)))
    return out


def own_figures(raw):
    """The figures of raw's report computed from its measurements."""
    text = render(raw)
    return figures(text) - fixed_figures(text, raw)


def test_no_figure_of_the_first_run_appears_in_the_report_of_the_second(monkeypatch):
    first, second = make_raw(1), make_raw(2)
    mine = own_figures(first)
    assert len(mine) > 200  # the check below has something to find
    report = render(second)
    # A figure of the first run in the second's report would not follow the second run's
    # measurements; numbers that merely coincide after rounding do follow them.
    assert sorted(mine & fixed_figures(report, second)) == []
    assert len(mine & figures(report)) < len(mine) / 20  # coincidences are rare
    # The check finds a figure carried over by fixed text in the generator, as in issue 16.
    carried = sorted(mine)[len(mine) // 2]
    monkeypatch.setattr(bench_report, "HEADER",
                        bench_report.HEADER + f"\nm7 trains at {carried} GFLOP/s here.\n")
    assert mine & fixed_figures(render(second), second) == {carried}


def test_a_run_replaces_its_own_kind_section_entirely():
    first, second = make_raw(1), make_raw(2)
    doc = bench_report.merge(render(first), bench_report.Run(second))
    assert sorted(own_figures(first) & fixed_figures(doc, second)) == []
    assert doc.count("bench-section kind=amd-f25-m1 begin") == 1
    assert "c000002" in doc and "c000001" not in doc


def test_a_run_keeps_the_other_kind_section_verbatim():
    avx512, avx2 = make_raw(1, "AVX-512"), make_raw(2, "AVX2")
    kept = bench_report.render_section(bench_report.Run(avx512))
    doc = bench_report.merge(render(avx512), bench_report.Run(avx2))
    sections = bench_report.split_sections(doc)
    assert list(sections) == ["amd-f26-m2", "amd-f25-m1"]  # the new kind appended
    assert sections["amd-f26-m2"] == kept.rstrip("\n") + "\n"
    # The first run's figures stay, but only inside its own section, under its provenance.
    assert own_figures(avx512) <= figures(sections["amd-f26-m2"])
    assert sorted(own_figures(avx512) & fixed_figures(sections["amd-f25-m1"], avx2)) == []
    assert doc.index("## AMD Zen 5 (family 26, model 2), AVX-512: ") < doc.index(
        "## AMD Zen 3 (family 25, model 1), AVX2: ")


def test_the_generator_prints_no_fixed_figures():
    """Numbers that appear whatever the run measured are the targets and the definitions, never
    measurements carried over from an earlier run."""
    raw = make_raw(3)
    fixed = fixed_figures(render(raw), raw)
    # The data sets' sizes, the W2 batch-1 subset, the date, the number of tiny models, W5's
    # validation images.
    defined = {"60,000", "10,000", "2030", "8,000", f"{workloads.W5_VAL:,}"}
    for m in MODELS:  # the models' parameter and FLOP counts
        spec = workloads.w1_spec(m)
        params, _ = workloads.spec_stats(spec)
        defined |= {str(params), f"{workloads.train_flops_per_sample(spec) / 1e6:.2f}"}
    ctx = bench_report.Ctx(bench_report.Run(raw))
    defined |= {f"{ctx.w3_total / 1e9:.2f}"}
    assert sorted(fixed - defined) == []


def test_missed_targets_carry_the_runs_gap_and_profile():
    raw = make_raw(5)
    run = bench_report.Run(raw)
    text = render(raw)
    missed = [r for r in bench_report.target_rows(run) if r["met"] is False]
    assert missed
    for r in missed:
        assert f"**{r['label']}**: nnfleet {r['n']}, peer {r['p']}" in text
    for scen, p in raw["profiles"].items():
        for sym, _, share in p["top"]:
            assert f"| `{sym}` | nnfleet | {100 * share:.1f}% |" in text
        assert p["total_text"] in text


def test_the_tiny_models_overhead_is_a_target_below_its_limit_in_milliseconds():
    raw = make_raw(3)
    for overhead, met in ((0.000299, True), (0.0003, False), (0.00041, False)):
        raw["values"]["tiny.overhead.nnfleet"] = [overhead] * 3
        rows = [r for r in bench_report.target_rows(bench_report.Run(raw))
                if r["scenario"] == "tiny-fleet"]
        assert len(rows) == 1
        assert rows[0]["label"] == "Tiny models: overhead per model (8,000 models) on 2 cores"
        assert rows[0]["n"] == f"{overhead * 1e3:.3f} ms"
        assert rows[0]["met"] is met
    missed = [r for r in bench_report.target_rows(bench_report.Run(raw))
              if r["scenario"] == "tiny-fleet"][0]
    assert bench_report.gap_text(missed) == "0.410 ms against < 0.3 ms (0.110 ms over)"
    launch = {"unit": "s", "have": 0.6, "need": 0.5}
    assert bench_report.gap_text(launch) == "0.600 s against < 0.5 s (0.100 s over)"
    raw["values"].pop("tiny.overhead.nnfleet")
    del raw["tiny_models"]  # a run from before the figure was measured
    row = [r for r in bench_report.target_rows(bench_report.Run(raw))
           if r["scenario"] == "tiny-fleet"][0]
    assert (row["n"], row["met"]) == ("missing", None)


def test_an_avx512_run_shows_the_avx2_paths_kernels_beside_the_native_ones():
    raw = make_raw(31, isa="AVX-512")
    assert "samples/s, AVX2 path" not in render(raw)  # a run without kernels_bench_avx2
    raw["kernels_avx2"] = [dict(k, samples_per_second=k["samples_per_second"] / 2)
                           for k in raw["kernels"][:2]]
    raw["commands"]["kernels-bench-avx2"] = "taskset -c 0 build/bench/kernels/kernels_bench_avx2"
    text = render(raw)
    assert "| samples/s, AVX2 path | native ÷ AVX2 path |" in text
    first, third = raw["kernels"][0], raw["kernels"][2]
    row = next(l for l in text.splitlines() if f"`{first['name']}`" in l)
    assert f"{first['samples_per_second'] / 2:,.0f}" in row and "2.00x" in row
    row = next(l for l in text.splitlines() if f"`{third['name']}`" in l)
    assert row.rstrip(" |").endswith("missing | —")
    assert "Command: `taskset -c 0 build/bench/kernels/kernels_bench_avx2`" in text


def test_remedies_name_no_numbers():
    for key, text in bench_report.REMEDIES.items():
        numbers = re.sub(r"\w*[A-Za-z]\w*", "", text)  # drop words: m7, im2col are names
        assert not re.search(r"\d", numbers), key


def test_a_quick_run_never_writes_benchmarks_md(tmp_path):
    md = os.path.join(REPO, "BENCHMARKS.md")
    before = open(md).read()
    with pytest.raises(ValueError, match="never writes BENCHMARKS.md"):
        bench_report.write(bench_report.Run(make_raw(6, mode="quick")), md)
    assert open(md).read() == before
    out = tmp_path / "quick.md"
    bench_report.write(bench_report.Run(make_raw(6, mode="quick")), str(out))
    assert "Quick run" in out.read_text()


def test_merging_refuses_a_file_without_sections():
    with pytest.raises(ValueError, match="no per-kind sections"):
        bench_report.merge("# Benchmarks\n\nold text\n", bench_report.Run(make_raw(7)))


def test_the_committed_benchmarks_md_has_per_kind_sections():
    with open(os.path.join(REPO, "BENCHMARKS.md")) as f:
        text = f.read()
    assert "bench-section isa=" not in text  # migrated
    sections = bench_report.split_sections(text)
    # Zen 3 and Zen 4 from before kinds were recorded (model unknown), Zen 5 family 26 model 2.
    assert list(sections) == ["amd-f25-zen-3", "amd-f25-zen-4", "amd-f26-m2"]
    for key, text in sections.items():  # each headed by its kind, run's machine, commit, date
        heading = text.split("\n", 1)[0]
        assert re.fullmatch(r"## AMD Zen \d \(family \d+, model [^)]+\), AVX[-0-9]+: .+, "
                            r"commit [0-9a-f]{7}[^,]*, \d{4}-.+", heading), heading
        # Zen 3 and Zen 4 predate the FMA probe; the Zen 5 section is from a probed run.
        assert ("not probed" in text) == (key != "amd-f26-m2"), key
    assert "commit 58c512d" in sections["amd-f25-zen-4"]  # restored from git history


def test_a_saved_run_is_rerendered_without_measuring(tmp_path):
    raw = make_raw(8)
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(raw))
    out = tmp_path / "out.md"
    subprocess.run(["/usr/bin/python3", os.path.join(REPO, "bench", "bench_report.py"), str(path),
                    "--md", str(out)], check=True, capture_output=True, text=True)
    assert out.read_text() == render(json.loads(path.read_text()))


def test_isa_comes_from_the_cpu_flags():
    assert bench_probe.isa_of(["fma", "avx2", "avx512f"]) == "AVX-512"
    assert bench_probe.isa_of(["fma", "avx2"]) == "AVX2"


PERF = """
    24.76%  libpython3.11.so.1.0  [.] _PyEval_EvalFrameDefault                   -      -
     7.99%  nnfleet               [.] nnfleet::dense_forward                     -      -
"""
CALLGRIND = """
620,463 (100.0%)  PROGRAM TOTALS
--------------------------------------------------------------------------------
Ir                file:function
--------------------------------------------------------------------------------
100,435 (16.19%)  ./elf/dl-lookup.c:do_lookup_x [/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2]
 45,510 ( 7.33%)  ???:nnfleet::im2col(float const*) [/work/build/nnfleet]
 31,944 ( 5.15%)  ./elf/dl-new-hash.h:do_lookup_x
 20,000 ( 3.22%)  ???:0x000000000483d000 [???]
 10,000 ( 1.61%)  ???:0x0000000004841000 [???]
"""
MASSIF = """snapshot=3
heap_tree=peak
n2: 1000 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
 n1: 750 0x4953DA4: nnfleet::Arena::Arena(unsigned long) (arena.cpp:12)
  n0: 750 0x4953E11: main (main.cpp:3)
 n0: 250 in 5 places, all below massif's threshold (1.00%)
snapshot=4
heap_tree=empty
"""


def test_profiles_are_reduced_to_top_symbols_with_shares():
    assert bench_probe.parse_perf(PERF) == [
        ["_PyEval_EvalFrameDefault", "libpython3.11.so.1.0", 0.2476],
        ["nnfleet::dense_forward", "nnfleet", 0.0799]]
    top, total = bench_probe.parse_callgrind(CALLGRIND)
    assert total == 620463
    assert top[0] == ["do_lookup_x", "ld-linux-x86-64.so.2", round(132379 / 620463, 4)]
    assert top[1] == ["nnfleet::im2col", "nnfleet", round(45510 / 620463, 4)]
    assert top[2] == [*bench_probe.JIT, round(30000 / 620463, 4)]
    top, total = bench_probe.parse_massif(MASSIF)
    assert total == 1000
    assert top[0] == ["nnfleet::Arena::Arena", "arena.cpp:12", 0.75]


SMAPS = """55d000000000-55d000400000 r-xp 00000000 fe:01 123 /work/build/nnfleet
Rss:                3072 kB
7f0000000000-7f0003b00000 rw-p 00000000 00:00 0 
Rss:               60416 kB
7f0004000000-7f0004010000 rw-p 00000000 00:00 0 
Rss:                  64 kB
7f0005000000-7f0005100000 r-xp 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libdnnl.so.2.6
Rss:                4096 kB
7f0005100000-7f0005200000 r--p 00100000 fe:01 456 /usr/lib/x86_64-linux-gnu/libdnnl.so.2.6
Rss:                1024 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                 128 kB
"""


def test_a_memory_map_is_reduced_to_mappings_with_shares():
    top, total = bench_probe.parse_smaps(SMAPS)
    assert total == (3072 + 60416 + 64 + 4096 + 1024 + 128) * 1024
    assert top[0] == ["anonymous mapping of 59.0 MiB", "anonymous memory",
                      round(60416 * 1024 / total, 4)]
    assert top[1] == ["libdnnl.so.2.6", "file", round(5120 * 1024 / total, 4)]
    assert top[2] == ["nnfleet", "file", round(3072 * 1024 / total, 4)]
    assert len(top) == 3  # the stack and the small anonymous mapping are under MIN_SHARE


def test_the_peak_sampler_runs_the_command_and_keeps_its_map(tmp_path):
    out = tmp_path / "peak.smaps"
    go = tmp_path / "go"
    # The command holds its 64 MiB until the sampler has seen them (it once held them for 0.5 s,
    # which a loaded machine could let pass between two samples).
    hold = ("import os, time, sys; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.01)")

    def release(kib):
        if kib >= 64 << 10:
            go.touch()

    code = bench_probe.smaps_peak(str(out), [sys.executable, "-c", hold, str(go)],
                                  on_sample=release)
    assert code == 0
    top, total = bench_probe.parse_smaps(out.read_text())
    assert total >= 64 << 20
    assert top[0][1] == "anonymous memory" and top[0][2] > 0.5


def test_w4_is_reported_beside_its_peer_and_missing_while_nnfleet_cannot_run_it():
    raw = make_raw(11)
    text = render(raw)
    assert "### W4: one small model per series" in text
    run = bench_report.Run(raw)
    for key in ("w4.sps.lstm.peer", "w4.sps.tcn.nnfleet", "w4.sps_pool.gru.peer"):
        assert f"{bench_report.med(run, key):,.0f}" in text, key
    assert bench_report.f_sec(bench_report.med(run, "w4.wall.pool")) in text
    # Until nnfleet has the layers: its W4 figures are missing, the peer's still shown.
    for k in [k for k in raw["values"] if k.startswith("w4.") and k.endswith(".nnfleet")]:
        del raw["values"][k]
    raw["unavailable"]["w4-fleet nnfleet"] = "this nnfleet has no GRU, LSTM layer"
    text = render(raw)
    row = next(line for line in text.splitlines() if line.startswith("| W4 lstm training"))
    assert row.split(" | ")[1] == "missing" and row.split(" | ")[5] == "missing"
    assert f"{bench_report.med(run, 'w4.sps.lstm.peer'):,.0f}" in row
    assert "this nnfleet has no GRU, LSTM layer" in text
    assert "w4-fleet" not in bench_report.missed_scenarios(bench_report.Run(raw))


@pytest.mark.parametrize("counts,valgrind,want", [(True, True, "perf"), (True, False, "perf"),
                                                  (False, True, "callgrind"),
                                                  (False, False, "perf")])
def test_time_profiles_use_perf_where_valgrind_cannot_run_the_build(monkeypatch, counts, valgrind,
                                                                     want):
    monkeypatch.setattr(bench_probe, "perf_counts", lambda: counts)
    monkeypatch.setattr(bench_probe, "valgrind_runs_native", lambda: valgrind)
    assert bench_probe.tool_for("time", "auto") == want
    assert bench_probe.tool_for("memory", "auto") == ("massif" if valgrind else "smaps")
    assert bench_probe.tool_for("time", "callgrind") == "callgrind"
    assert bench_probe.tool_for("time", "none") is None


def w5_rows(raw):
    return {r["label"].split(",")[0].split(" (")[0]: r
            for r in bench_report.target_rows(bench_report.Run(raw))
            if r["scenario"].startswith("w5-")}


def test_w5_targets_compare_the_search_with_optuna_and_with_itself_unpruned():
    raw = make_raw(12)
    v = raw["values"]
    v["w5.wall.nnfleet"], v["w5.wall.peer"] = [30.0] * 3, [330.0] * 3
    v["w5.best_test.nnfleet"], v["w5.best_test.peer"] = [0.851] * 3, [0.855] * 3
    v["w5.epochs_trained.nnfleet"], v["w5.epochs_trained.unpruned"] = [243.0] * 3, [729.0] * 3
    v["w5.best_val.nnfleet"], v["w5.best_val.unpruned"] = [0.86] * 3, [0.8675] * 3
    rows = w5_rows(raw)
    assert [r["met"] for r in rows.values()] == [True, True, True, False]
    speed = rows["W5 search of 81 trials"]
    assert (speed["ratio"], speed["target"]) == ("11.00x", "≥ 10x faster")
    test = rows["W5 best trial's test accuracy vs Optuna's"]
    assert (test["n"], test["p"], test["ratio"]) == ("0.8510", "0.8550", "-0.40 pt")
    share = rows["W5 epochs trained"]
    assert (share["n"], share["p"], share["ratio"]) == ("243", "729", "33%")
    val = rows["W5 best validation accuracy"]
    assert bench_report.gap_text(val) == "-0.75 pt against ≥ -0.50 pt (0.25 pt short)"
    v["w5.epochs_trained.nnfleet"] = [300.0] * 3  # 41%: more than 40% of the unpruned epochs
    share = w5_rows(raw)["W5 epochs trained"]
    assert share["met"] is False and bench_report.gap_text(share) == "41% against ≤ 40%"
    # Only the speed is profiled: the others are about which trials the search kept.
    assert [r["scenario"] for r in rows.values()] == ["w5-search"] + ["w5-pruning"] * 3
    assert "w5-pruning" in bench_report.missed_scenarios(bench_report.Run(raw))
    assert "w5-pruning" in bench_report.UNPROFILED and "w5-search" not in bench_report.UNPROFILED


def test_w5_is_reported_side_by_side_and_missing_while_nnfleet_cannot_search():
    raw = make_raw(13)
    run = bench_report.Run(raw)
    text = render(raw)
    assert "### W5: a hyper-parameter search with pruning" in text
    row = next(line for line in text.splitlines() if line.startswith("| best trial's test acc"))
    for side in ("nnfleet", "unpruned", "peer"):
        assert bench_report.f_acc(bench_report.med(run, f"w5.best_test.{side}")) in row
    same = next(line for line in text.splitlines() if line.startswith("| same study"))
    assert same == "| same study with 1 worker and 2 | yes | — | no (trial 0: params, values) |"
    for k in [k for k in raw["values"] if k.startswith("w5.") and not k.endswith(".peer")]:
        del raw["values"][k]
    del raw["info"]["w5.same.nnfleet"]
    raw["unavailable"]["w5-search nnfleet"] = "this nnfleet does not know the plan key(s) search"
    text = render(raw)
    row = next(line for line in text.splitlines() if line.startswith("| W5 search of"))
    assert row.split(" | ")[1] == "missing" and row.split(" | ")[5] == "missing"
    assert "this nnfleet does not know the plan key(s) search" in text
    assert not [s for s in bench_report.missed_scenarios(bench_report.Run(raw))
                if s.startswith("w5-")]


def test_many_models_rows_hold_overhead_memory_and_disk_to_their_limits():
    raw = make_raw(5)
    assert [r for r in bench_report.target_rows(bench_report.Run(raw))
            if r["scenario"] == "many-models"] == []  # runs from before it was measured
    raw["many_models"] = [1000, 100000]
    cases = (((0.04, 40.0, 42.0, 30e6), (True, True, True)),
             ((0.74, 37.5, 159.2, 222e6), (False, False, False)))
    for (outside, rss_small, rss_big, written), met in cases:
        for n, rss in ((1000, rss_small), (100000, rss_big)):
            raw["values"].update({f"many.{n}.wall_s": [10.0], f"many.{n}.train_sum_s": [5.0],
                                  f"many.{n}.outside_training": [outside],
                                  f"many.{n}.peak_rss_mb": [rss],
                                  f"many.{n}.bytes_written": [written],
                                  f"many.{n}.files_written": [9]})
        rows = [r for r in bench_report.target_rows(bench_report.Run(raw))
                if r["scenario"] == "many-models"]
        assert [r["met"] for r in rows] == list(met)
    assert [bench_report.gap_text(r) for r in rows] == [
        "74% against ≤ 5%", "425% against ≤ 110%", "222 MB against < 50 MB"]
    text = render(raw)
    assert "### Many tiny models in one run (bench/many_models.py)" in text
    assert "| 100,000 | 10.0 s | 5.000 s | 74% | 159 MB | 222 MB | 9 |" in text


def test_the_packed_w3_table_sets_each_pack_beside_the_models_alone():
    raw = make_raw(6)
    assert "W3 packed against unpacked" not in render(raw)
    raw["w3_pack"] = {"epochs": 10, "rounds": 3, "packs": [6, 60]}
    for batch, alone in ((16, 80.0), (32, 100.0)):
        raw["values"][f"w3pack.cpu.{batch}.alone"] = [alone]
        raw["values"][f"w3pack.cpu.{batch}.pack6"] = [alone * 0.9]
        raw["values"][f"w3pack.cpu.{batch}.pack60"] = [alone * 0.75]
    text = render(raw)
    assert "| 16 | alone | 80.0 | — |" in text
    assert "| 16 | pack6 | 72.0 | 0.90x |" in text
    assert "| 32 | pack60 | 75.0 | 0.75x |" in text
    frac = [r for r in bench_report.target_rows(bench_report.Run(raw))
            if r["label"].startswith("W3 on 2 cores, fraction of the fp32 peak")]
    assert len(frac) == 1 and frac[0]["unit"] == "frac" and frac[0]["need"] == 0.6


def test_tiny_overhead_phases_read_the_job_lines_alone(tmp_path):
    """A run of more than 1,000 models writes no "start" lines: each job's line carries its start
    (the full bench of issue 36 lost its tiny-models figure to reading "start" lines)."""
    import tiny_overhead
    lines = [{"kind": "session", "session": 1, "start": 100.0},
             {"kind": "job", "model": "a", "start": 100.5, "end": 101.0},
             {"kind": "job", "model": "b", "start": 100.6, "end": 101.5},
             {"kind": "end", "session": 1, "t": 101.6}]
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (tmp_path / "results.json").write_text(json.dumps(
        {"models": [{"name": "a", "seconds": 0.4}, {"name": "b", "seconds": 0.8}]}))
    r = tiny_overhead.phases(str(tmp_path), 100.0, 102.0, 2, 2)
    assert r["launch"] == pytest.approx(0.5)
    assert r["models"] == pytest.approx(1.0)
    assert r["tail"] == pytest.approx(0.5)
    assert r["overhead_ms"] == pytest.approx((2.0 - 1.2 / 2) / 2 * 1e3)
