"""BENCHMARKS.md per machine kind, with the fp32 peak measured by bench/fma_probe.c (issue 36).

Merging: a new kind's section is appended and the others kept byte for byte; a rerun of a kind
replaces only its own; files keyed by instruction set migrate. "% peak" divides by the probed peak.
The probe itself runs once here, only to check that it prints a positive rate for each vector
width cpuid reports (never a speed). Run by CTest: /usr/bin/python3 -m pytest.
"""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, HERE)
import bench_probe  # noqa: E402
import bench_report  # noqa: E402
import run_bench  # noqa: E402
import workloads  # noqa: E402
from test_bench_report import make_raw, render  # noqa: E402

ZEN3, ZEN4, ZEN5 = ("AuthenticAMD", 25, 0x21), ("AuthenticAMD", 25, 0x11), ("AuthenticAMD", 26, 2)
HAND = "## From Python: a hand-measured table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def run_of(seed, kind, isa="AVX-512"):
    return bench_report.Run(make_raw(seed, isa, family_model=kind))


def three_kinds():
    """A BENCHMARKS.md with Zen 3, Zen 4 and Zen 5 sections and hand-written text after them."""
    doc = render(make_raw(1, "AVX2", family_model=ZEN3))
    doc = bench_report.merge(doc, run_of(2, ZEN4))
    doc = bench_report.merge(doc, run_of(3, ZEN5))
    cut = doc.index(bench_report.METHOD_HEADING)
    return doc[:cut] + HAND + "\n" + doc[cut:]


def span(doc, key):
    """The bytes of a section, markers included."""
    begin, end = bench_report.BEGIN.format(key), bench_report.END.format(key)
    return doc[doc.index(begin):doc.index(end) + len(end) + 1]


def test_kinds_are_named_by_vendor_family_and_model():
    k = bench_probe.machine_kind("AuthenticAMD", 26, 2, "AVX-512")
    assert (k["key"], k["title"], k["name"]) == ("amd-f26-m2", "AMD Zen 5 (family 26, model 2)",
                                                "Zen 5")
    for model, name in ((0x01, "Zen 3"), (0x21, "Zen 3"), (0x50, "Zen 3"), (0x11, "Zen 4"),
                        (0x61, "Zen 4"), (0xA0, "Zen 4")):
        assert bench_probe.machine_kind("AuthenticAMD", 25, model, "AVX2")["name"] == name
    other = bench_probe.machine_kind("AuthenticAMD", 25, 0x90, "AVX2")
    assert (other["key"], other["title"]) == ("amd-f25-m144", "AMD family 25, model 144")
    intel = bench_probe.machine_kind("GenuineIntel", 6, 143, "AVX-512")
    assert (intel["key"], intel["title"]) == ("intel-f6-m143", "Intel family 6, model 143")
    assert bench_probe.superseded_keys(k) == ["amd-f26-zen-5"]
    assert bench_probe.superseded_keys(intel) == []


def test_a_new_kinds_section_is_appended_and_the_others_kept_byte_identical():
    doc = bench_report.merge(render(make_raw(1, "AVX2", family_model=ZEN3)), run_of(2, ZEN4))
    cut = doc.index(bench_report.METHOD_HEADING)
    doc = doc[:cut] + HAND + "\n" + doc[cut:]
    kept = {k: span(doc, k) for k in ("amd-f25-m33", "amd-f25-m17")}
    new = bench_report.merge(doc, run_of(3, ZEN5))
    assert list(bench_report.split_sections(new)) == ["amd-f25-m33", "amd-f25-m17", "amd-f26-m2"]
    for k, text in kept.items():
        assert span(new, k) == text
    assert new.index(span(new, "amd-f25-m17")) < new.index(span(new, "amd-f26-m2"))
    assert HAND in new and new.index(span(new, "amd-f26-m2")) < new.index(HAND)
    assert new.index(HAND) < new.index(bench_report.METHOD_HEADING)
    assert "## AMD Zen 5 (family 26, model 2), AVX-512: Test CPU, commit c000003" in new


def test_a_rerun_of_a_kind_replaces_only_its_own_section_in_its_place():
    doc = three_kinds()
    kept = {k: span(doc, k) for k in ("amd-f25-m33", "amd-f26-m2")}
    again = run_of(4, ZEN4)
    new = bench_report.merge(doc, again)
    assert list(bench_report.split_sections(new)) == ["amd-f25-m33", "amd-f25-m17", "amd-f26-m2"]
    for k, text in kept.items():
        assert span(new, k) == text
    zen4 = span(new, "amd-f25-m17")
    assert "commit c000004" in zen4 and "commit c000002" not in new
    assert bench_report.split_sections(new)["amd-f25-m17"] == bench_report.section_text(again)
    assert new.count(HAND) == 1
    assert bench_report.merge(new, again) == new  # merging is idempotent


OLD_FILE = """# Benchmarks

The old header: one section per instruction set.

<!-- bench-section isa=AVX2 begin -->
## AVX2: AMD EPYC, commit 53c9fc3, 2026-12-03 18:09:05 UTC

| figure | value |
|---|---|
| single-core fp32 peak: 32 FLOP/cycle x measured clock | 94.7 GFLOP/s |

<!-- bench-section isa=AVX2 end -->

## AVX-512

Not measured yet: run `make bench` on a machine with AVX-512 to fill this section.

""" + HAND + "\n## How each figure is measured\n\n- the old method.\n"


def test_an_isa_keyed_file_migrates_keeping_its_sections_verbatim():
    old_section = OLD_FILE.split("isa=AVX2 begin -->\n")[1].split("<!-- bench-section")[0]
    assert bench_report.split_sections(OLD_FILE) == {"isa-avx2": old_section}
    new = bench_report.merge(OLD_FILE, run_of(5, ZEN5))
    assert "bench-section isa=" not in new and "Not measured yet" not in new
    sections = bench_report.split_sections(new)
    assert list(sections) == ["isa-avx2", "amd-f26-m2"]
    assert sections["isa-avx2"] == old_section  # byte for byte
    assert new.count(HAND) == 1 and new.startswith(bench_report.HEADER)
    assert new.endswith(bench_report.METHOD) and "the old method" not in new
    # An old run's raw.json (no kind recorded) re-renders under the same legacy key.
    raw = make_raw(6, "AVX2")
    del raw["machine"]["kind"]
    again = bench_report.merge(new, bench_report.Run(raw))
    assert list(bench_report.split_sections(again)) == ["isa-avx2", "amd-f26-m2"]
    assert "## AVX2 machine (kind not recorded), AVX2: Test CPU" in again


def test_a_run_takes_the_place_of_the_restored_section_of_its_microarchitecture():
    restored = "## AMD Zen 4 (family 25, model not recorded), AVX-512: AMD EPYC, commit 58c512d\n"
    doc = three_kinds()
    doc = doc.replace(span(doc, "amd-f25-m17"), bench_report.BEGIN.format("amd-f25-zen-4") + "\n"
                      + restored + bench_report.END.format("amd-f25-zen-4") + "\n")
    assert list(bench_report.split_sections(doc)) == ["amd-f25-m33", "amd-f25-zen-4",
                                                      "amd-f26-m2"]
    new = bench_report.merge(doc, run_of(7, ("AuthenticAMD", 25, 0x61)))
    assert list(bench_report.split_sections(new)) == ["amd-f25-m33", "amd-f25-m97", "amd-f26-m2"]
    assert restored not in new
    # A Zen 5 run leaves the restored Zen 4 alone.
    other = bench_report.merge(doc, run_of(8, ZEN5))
    assert restored in other


def test_percent_peak_divides_by_the_probed_peak():
    raw = make_raw(9, "AVX-512")
    run = bench_report.Run(raw)
    c = bench_report.Ctx(run)
    g512 = bench_report.med(run, "fma.gflops.512")
    assert c.peak_bits == 512 and c.peak == g512
    assert "FMA probe" in c.peak_src
    text = render(raw)
    # m7's one-core row: its GFLOP/s over the probed 512-bit rate.
    sps = bench_report.med(run, "w1.sps.m7.nnfleet")
    g = sps * workloads.train_flops_per_sample(workloads.w1_spec("m7")) / 1e9
    row = next(r for r in bench_report.target_rows(run) if r["label"].startswith("W1 m7 "))
    assert row["ngf"].endswith(f"{bench_report.f_pct(g / g512)} peak)")
    # W3 on 2 cores: over twice the per-core peak.
    wall = bench_report.med(run, "w3.wall.nnfleet")
    assert f"{bench_report.f_pct(c.w3_total / 1e9 / wall / (2 * g512))} peak" in text
    # A kernel microbenchmark's % peak.
    k = raw["kernels"][0]
    line = next(l for l in text.splitlines() if f"`{k['name']}`" in l)
    assert f"| {bench_report.f_pct(k['flops_per_second'] / 1e9 / g512)} |" in line
    # The ceiling and Machine tables show every width, the machine peak and the kind.
    for bits in (128, 256, 512):
        fpc = bench_report.med(run, f"fma.flop_per_cycle.{bits}")
        assert (f"{bench_report.med(run, f'fma.gflops.{bits}'):.1f} GFLOP/s, {fpc:.1f} "
                "FLOP/cycle") in text
    assert f"| machine fp32 peak: the same x 2 cores used | {2 * g512:.1f} GFLOP/s |" in text
    assert "| CPU kind (this section's key) | AMD Zen 5 (family 26, model 2): vendor AMD" in text
    assert "512-bit FMAs run " in text


def test_a_run_without_the_probe_assumes_32_flop_per_cycle_and_says_not_probed():
    raw = make_raw(10, "AVX2")
    for k in [k for k in raw["values"] if k.startswith("fma.")]:
        del raw["values"][k]
    run = bench_report.Run(raw)
    c = bench_report.Ctx(run)
    assert c.peak == pytest.approx(32 * bench_report.med(run, "clock.probe_mhz") / 1000)
    text = render(raw)
    assert "not probed" in text and "FMA probe, 128-bit" not in text


FMA_OUT = """clock_mhz 3447
fma bits=128 isa=FMA chains=12 gflops=54.2 flop_per_cycle=15.7
fma bits=256 isa=FMA chains=12 gflops=109.9 flop_per_cycle=31.9
fma bits=512 isa=AVX-512F chains=16 gflops=212.5 flop_per_cycle=61.7
"""
CPUID_OUT = """vendor AuthenticAMD
family 26
model 2
cache level=1 type=data size_kib=48 ways=12 line=64 shared_by=1 leaf=0x80000005
cache level=1 type=instruction size_kib=32 ways=8 line=64 shared_by=1 leaf=0x80000005
cache level=2 type=unified size_kib=1024 ways=0 line=64 shared_by=1 leaf=0x80000006
cache level=3 type=unified size_kib=32768 ways=0 line=64 shared_by=0 leaf=0x80000006
"""


def test_the_probes_output_is_parsed():
    r = bench_probe.parse_fma_probe(FMA_OUT)
    assert r["clock_mhz"] == 3447
    assert [(w["bits"], w["isa"], w["chains"], w["gflops"], w["flop_per_cycle"])
            for w in r["widths"]] == [(128, "FMA", 12, 54.2, 15.7), (256, "FMA", 12, 109.9, 31.9),
                                      (512, "AVX-512F", 16, 212.5, 61.7)]
    with pytest.raises(ValueError, match="expected 'fma bits=...' lines"):
        bench_probe.parse_fma_probe("clock_mhz 3000\n")
    with pytest.raises(ValueError, match="gflops"):
        bench_probe.parse_fma_probe("fma bits=128 isa=FMA chains=12 flop_per_cycle=1\n")
    cpuid = bench_probe.parse_cpuid(CPUID_OUT)
    assert (cpuid["vendor"], cpuid["family"], cpuid["model"]) == ("AuthenticAMD", 26, 2)
    # lscpu's sizes where it shows them; cpuid's where the VM hides them (empty or zero).
    shown = {"L1d cache": "96 KiB (2 instances)", "L2 cache": "2 MiB (2 instances)",
             "L3 cache": "32 MiB (1 instance)"}
    assert bench_probe.caches_of(shown, cpuid) == (
        "L1d 96 KiB (2 instances), L2 2 MiB (2 instances), L3 32 MiB (1 instance)", "lscpu")
    for hidden in ({}, {"L1d cache": "0 KiB", "L2 cache": "", "L3 cache": "0"}):
        text, source = bench_probe.caches_of(hidden, cpuid)
        assert text == "L1d 48 KiB, L2 1 MiB, L3 32 MiB"
        assert source.startswith("cpuid leaf 0x80000005, 0x80000006")
    assert bench_probe.caches_of({}, None)[0] == "L1d ?, L2 ?, L3 ?"


def test_run_bench_keeps_the_best_core_per_width_under_the_reports_keys():
    b = run_bench.Bench.__new__(run_bench.Bench)
    b.cores, b.cfg, b.values, b.info, b.fma_exe = [0, 1], {"clock_runs": 1}, {}, {}, "fma_probe"
    slower = FMA_OUT.replace("212.5", "200.0").replace("54.2", "60.0")
    outputs = {"fma-probe-core0": FMA_OUT, "fma-probe-core1": slower}
    b.run = lambda label, cmd: (subprocess.CompletedProcess(cmd, 0, outputs[label], ""), 0.1)
    b.fma_probe()
    assert b.values["fma.gflops.512"] == [212.5] and b.values["fma.gflops.128"] == [60.0]
    assert b.values["fma.flop_per_cycle.256"] == [31.9] and b.values["fma.clock_mhz.512"] == [3447]
    assert b.info["fma.isa.512"] == "AVX-512F, 16 chains"


def test_the_probe_runs_and_prints_a_positive_rate_for_each_width_cpuid_reports(tmp_path):
    exe = tmp_path / "fma_probe"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(exe),
                    os.path.join(REPO, "bench", "fma_probe.c")], check=True)
    with open("/proc/cpuinfo") as f:
        info = f.read()
    flags = set(re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split())
    want = [128] + ([256] if {"fma", "avx"} <= flags else []) + (
        [512] if "avx512f" in flags else [])
    r = bench_probe.parse_fma_probe(subprocess.run([str(exe), "1"], check=True,
                                                   capture_output=True, text=True).stdout)
    assert [w["bits"] for w in r["widths"]] == want
    assert r["clock_mhz"] > 0
    for w in r["widths"]:
        assert w["gflops"] > 0 and w["flop_per_cycle"] > 0, w
    cpuid = bench_probe.parse_cpuid(subprocess.run([str(exe), "--cpuid"], check=True,
                                                   capture_output=True, text=True).stdout)
    field = lambda k: re.search(rf"^{k}\s*:\s*(\S+)", info, re.M).group(1)  # noqa: E731
    assert (cpuid["vendor"], cpuid["family"], cpuid["model"]) == (
        field("vendor_id"), int(field("cpu family")), int(field("model")))
