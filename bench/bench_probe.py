"""What bench/run_bench.py learns about the machine, and where a scenario's time (or memory) goes.

machine(): the CPU, its kind (vendor, family and model from /proc/cpuinfo, named where known:
machine_kind), its instruction set (AVX2 or AVX-512, from the flags), caches (lscpu, else cpuid
through bench/fma_probe.c --cpuid where the VM hides them), memory, system and the commit, probed
once when a run starts and saved in its raw.json, so that a re-render says what the run ran on,
not what renders it. BENCHMARKS.md keeps one section per kind (kind["key"]).

parse_fma_probe(): bench/fma_probe.c's output (the clock, then GFLOP/s and FLOP/cycle of
independent FMAs per vector width), from which the report takes the core's fp32 peak.

Profiles of the scenarios behind missed targets: `perf record` where `perf stat -e instructions`
counts on this machine (many VMs expose no hardware counters), else callgrind on a reduced run;
memory targets use valgrind massif on a reduced run, or where valgrind cannot run the build
(AVX-512) the process's own memory map at its resident peak (`bench_probe.py --smaps-peak`, which
runs the command and samples /proc/PID/smaps). Each profile is reduced to its top symbols or
mappings with their shares (parse_perf, parse_callgrind, parse_massif, parse_smaps: pure functions
over the tools' text).

  bench/bench_probe.py --smaps-peak OUT -- CMD...   runs CMD; OUT gets its smaps at the peak
"""
import os
import platform
import re
import subprocess
import sys
import time

TOP = 12          # symbols kept per profile
MIN_SHARE = 0.005  # and only those with at least this share


def sh(cmd, timeout=30):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def isa_of(flags):
    """The instruction set a section of BENCHMARKS.md is kept under, from cpuinfo's flags."""
    flags = set(flags)
    if "avx512f" in flags:
        return "AVX-512"
    if "avx2" in flags:
        return "AVX2"
    return "baseline (no AVX2)"


# AMD family 25 (0x19) by model: Zen 3 (Milan, Vermeer, Cezanne, Rembrandt...) or Zen 4 (Genoa,
# Raphael, Phoenix, Bergamo...); family 26 (0x1A) is Zen 5 whatever the model.
ZEN_25 = [(0x00, 0x0F, "Zen 3"), (0x10, 0x1F, "Zen 4"), (0x20, 0x5F, "Zen 3"),
          (0x60, 0x7F, "Zen 4"), (0xA0, 0xAF, "Zen 4")]
VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel", "HygonGenuine": "Hygon"}


def kind_name(vendor, family, model):
    """The microarchitecture's name where known ("Zen 5"), else None."""
    if vendor == "AMD" and family == 26:
        return "Zen 5"
    if vendor == "AMD" and family == 25:
        return next((n for lo, hi, n in ZEN_25 if lo <= model <= hi), None)
    return None


def machine_kind(vendor_id, family, model, isa):
    """The kind of machine a section of BENCHMARKS.md is kept under: {key ("amd-f26-m2"), title
    ("AMD Zen 5 (family 26, model 2)"), vendor, family, model, name, isa}. vendor_id is cpuinfo's
    ("AuthenticAMD"); family and model its decimal "cpu family" and "model" (None: unknown)."""
    vendor = VENDORS.get(vendor_id, vendor_id or "unknown vendor")
    name = kind_name(vendor, family, model) if family is not None and model is not None else None
    slug = re.sub(r"[^a-z0-9]+", "-", vendor.lower()).strip("-") or "cpu"
    fm = f"family {family}, model {model}"
    return {"key": f"{slug}-f{family}-m{model}",
            "title": f"{vendor} {name} ({fm})" if name else f"{vendor} {fm}",
            "vendor": vendor, "family": family, "model": model, "name": name, "isa": isa}


def superseded_keys(kind):
    """Keys of sections a run of `kind` replaces besides its own: a section restored from before
    kinds were recorded knows its microarchitecture but not its model ("amd-f25-zen4")."""
    if not kind.get("name"):
        return []
    slug = re.sub(r"[^a-z0-9]+", "-", f"{kind['vendor']}-f{kind['family']}-{kind['name']}".lower())
    return [slug]


def parse_fma_probe(text):
    """bench/fma_probe.c's output -> {clock_mhz, widths: [{bits, isa, chains, gflops,
    flop_per_cycle}]} (widths in the order printed: 128, 256, 512 where the CPU has them)."""
    out = {"clock_mhz": None, "widths": []}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "clock_mhz":
            out["clock_mhz"] = float(parts[1])
        elif parts and parts[0] == "fma":
            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            try:
                out["widths"].append({"bits": int(kv["bits"]), "isa": kv["isa"],
                                      "chains": int(kv["chains"]),
                                      "gflops": float(kv["gflops"]),
                                      "flop_per_cycle": float(kv["flop_per_cycle"])})
            except (KeyError, ValueError) as e:
                raise ValueError(f"failed to read fma_probe's line '{line}': expected bits=, "
                                 f"isa=, chains=, gflops= and flop_per_cycle=, got {e}")
    if not out["widths"]:
        raise ValueError(f"failed to read fma_probe's output: expected 'fma bits=...' lines, got "
                         f"{text.strip()[:200]!r}")
    return out


def parse_cpuid(text):
    """`fma_probe --cpuid` -> {vendor, family, model, caches: [{level, type, size_kib, leaf}]}."""
    out = {"vendor": None, "family": None, "model": None, "caches": []}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("vendor", "family", "model"):
            out[parts[0]] = parts[1] if parts[0] == "vendor" else int(parts[1])
        elif parts and parts[0] == "cache":
            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            out["caches"].append({"level": int(kv["level"]), "type": kv["type"],
                                  "size_kib": int(kv["size_kib"]), "leaf": kv.get("leaf", "?")})
    return out


def kib_text(kib):
    return f"{kib // 1024} MiB" if kib >= 1024 and kib % 1024 == 0 else f"{kib} KiB"


def caches_of(lscpu, cpuid):
    """(text, source): lscpu's L1d/L2/L3 where it shows them (non-empty, not zero), else the
    per-core sizes cpuid gives (fma_probe --cpuid), else '?'."""
    shown = {k: lscpu.get(f"{k} cache", "").strip() for k in ("L1d", "L2", "L3")}
    if all(v and not re.match(r"^0\b", v) for v in shown.values()):
        return (f"L1d {shown['L1d']}, L2 {shown['L2']}, L3 {shown['L3']}", "lscpu")
    found = {}
    for c in (cpuid or {}).get("caches", []):
        name = "L1d" if c["level"] == 1 and c["type"] == "data" else (
            f"L{c['level']}" if c["level"] in (2, 3) and c["type"] == "unified" else None)
        if name and c["size_kib"] > 0 and name not in found:
            found[name] = c
    if not found:
        return ("L1d ?, L2 ?, L3 ?", "lscpu shows none and cpuid gave none")
    text = ", ".join(f"{n} {kib_text(found[n]['size_kib'])}" if n in found else f"{n} ?"
                     for n in ("L1d", "L2", "L3"))
    leaves = ", ".join(dict.fromkeys(c["leaf"] for c in found.values()))
    return (text, f"cpuid leaf {leaves}, as lscpu shows none (the VM hides them): L1d and L2 per "
                  "core, L3 as cpuid reports it, on some EPYCs the whole package's")


def machine(repo, cores, fma_probe=None):
    lscpu = {}
    for line in sh(["lscpu"]).splitlines():
        k, _, v = line.partition(":")
        lscpu[k.strip()] = v.strip()
    with open("/proc/cpuinfo") as f:
        cpuinfo = f.read().splitlines()
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo if l.startswith("flags")), [])
    mhz = [float(l.split(":")[1]) for l in cpuinfo if l.startswith("cpu MHz")]
    with open("/proc/meminfo") as f:
        mem = next((int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal")), None)
    with open("/etc/os-release") as f:
        osname = next((l.split("=", 1)[1].strip().strip('"') for l in f
                       if l.startswith("PRETTY_NAME")), "?")
    commit = sh(["git", "-C", repo, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    isa = isa_of(flags)
    field = lambda name: next((l.split(":", 1)[1].strip() for l in cpuinfo  # noqa: E731
                               if l.split(":", 1)[0].strip() == name), None)
    num = lambda v: int(v) if v and v.isdigit() else None  # noqa: E731
    kind = machine_kind(field("vendor_id"), num(field("cpu family")), num(field("model")), isa)
    cpuid = parse_cpuid(sh([fma_probe, "--cpuid"])) if fma_probe else None
    caches, caches_source = caches_of(lscpu, cpuid)
    have = [n for f, n in (("avx2", "AVX2"), ("fma", "FMA"), ("avx512f", "AVX-512")) if f in flags]
    return {"cpu": lscpu.get("Model name", "?"), "isa": isa, "kind": kind,
            "flags": ", ".join(have) or "no AVX2",
            "cores": f"{len(cores)} used ({', '.join(map(str, cores))}); lscpu: "
                     f"{lscpu.get('Core(s) per socket', '?')} core(s) per socket x "
                     f"{lscpu.get('Socket(s)', '?')} socket(s), "
                     f"{lscpu.get('Thread(s) per core', '?')} thread(s) per core",
            "nominal_mhz": max(mhz) if mhz else None,
            "caches": caches, "caches_source": caches_source,
            "mem": mem, "os": f"{osname}, Linux {platform.release()}",
            "hypervisor": lscpu.get("Hypervisor vendor", "none"),
            "commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "node": sh(["node", "--version"])}


def perf_counts():
    """True when `perf stat -e instructions true` counts (a number, not '<not supported>')."""
    try:
        p = subprocess.run(["perf", "stat", "-x", ",", "-e", "instructions", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    first = next((l for l in p.stderr.splitlines() if "instructions" in l), "")
    return p.returncode == 0 and first.split(",")[0].strip().isdigit()


def valgrind_runs_native():
    """False on a CPU with AVX-512: valgrind (3.19, Debian 12) has no AVX-512 decoder, so it stops
    at the first such instruction of nnfleet's -march=native build (seen on an AMD EPYC with
    AVX-512: every callgrind and massif profile of a full run failed)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return True
    return "avx512f" not in flags


def tool_for(kind, choice):
    """The profiler for a scenario: memory -> massif (smaps where valgrind cannot run the build);
    time -> perf if it counts instructions or valgrind cannot run the build (perf then samples
    the cpu-clock), else callgrind (choice 'auto'), or the one forced by --profiler."""
    if choice == "none":
        return None
    if kind == "memory":
        return "massif" if valgrind_runs_native() else "smaps"
    if choice == "auto":
        return "perf" if perf_counts() or not valgrind_runs_native() else "callgrind"
    return choice


JIT = ("(JIT-compiled code: libxsmm's kernels)", "anonymous memory")


def short_name(sym):
    """A demangled C++ name without its argument list (and trailing const), for the tables."""
    sym = sym.strip()
    if sym.endswith(" const"):
        sym = sym[:-len(" const")]
    if sym.endswith(")"):
        depth = 0
        for i in range(len(sym) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(sym[i], 0)
            if depth == 0:
                if i > 0:
                    sym = sym[:i]
                break
    return sym


def _top(shares, total):
    out = sorted(((s, o, v / total) for (s, o), v in shares.items()), key=lambda t: -t[2])
    return [[s, o, round(v, 4)] for s, o, v in out[:TOP] if v >= MIN_SHARE]


def parse_perf(text):
    """`perf report --stdio --no-children --sort dso,symbol` -> [[symbol, object, share]]."""
    shares = {}
    for line in text.splitlines():
        parts = re.split(r"\s{2,}", line.strip())
        if len(parts) < 3 or not parts[0].endswith("%"):
            continue
        try:
            pct = float(parts[0][:-1])
        except ValueError:
            continue
        sym = short_name(re.sub(r"^\[.\]\s*", "", parts[2]))
        key = JIT if parts[1] in ("[unknown]", "[anon]") or parts[1].startswith("[JIT]") else (
            sym, parts[1])
        shares[key] = shares.get(key, 0) + pct
    return _top(shares, 100.0)


def parse_callgrind(text):
    """`callgrind_annotate` -> ([[function, object, share of Ir]], total Ir). A function split
    over several source files (inlined code) is summed."""
    total = None
    shares = {}
    line_re = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(.*?)(?:\s+\[(.*)\])?\s*$")
    for line in text.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        what = m.group(2)
        if what.startswith("PROGRAM TOTALS"):
            total = count
            continue
        if ":" not in what:
            continue
        fn = short_name(what.split(":", 1)[1])
        obj = os.path.basename(m.group(3)) if m.group(3) else ""
        key = JIT if obj == "???" and fn.startswith("0x") else (fn, obj)
        shares[key] = shares.get(key, 0) + count
    if not total:
        return [], None
    # The same function seen with and without its object name: fold into the named one.
    named = {fn: obj for fn, obj in shares if obj}
    folded = {}
    for (fn, obj), v in shares.items():
        k = (fn, obj or named.get(fn, ""))
        folded[k] = folded.get(k, 0) + v
    return _top(folded, total), total


def parse_massif(text):
    """A massif.out file -> ([[allocation site, object, share of the peak heap]], peak bytes):
    the direct children of the peak snapshot's heap tree."""
    lines = text.splitlines()
    try:
        i = lines.index("heap_tree=peak")
    except ValueError:
        return [], None
    m = re.match(r"n\d+: (\d+) ", lines[i + 1]) if i + 1 < len(lines) else None
    if not m:
        return [], None
    total = int(m.group(1))
    shares = {}
    for line in lines[i + 2:]:
        if not line.startswith(" "):
            break
        if line.startswith("  "):
            continue  # deeper levels
        c = re.match(r" n\d+: (\d+) (?:0x[0-9A-Fa-f]+: )?(.*?)(?: \((?:in )?([^()]*)\))?$", line)
        if c:
            site, where = short_name(c.group(2)), c.group(3) or ""
            shares[(site, os.path.basename(where))] = int(c.group(1))
    return (_top(shares, total) if total else []), total


def parse_smaps(text):
    """/proc/PID/smaps -> ([[mapping, object, share of the resident set]], resident bytes). Files
    are named by their base name, summed over their mappings; each anonymous mapping of 1 MiB or
    more is a row named by its size (an arena, a data set; mappings of one size share a row), the
    smaller ones one row."""
    rows, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$", line)
        if m:
            size = int(m.group(2), 16) - int(m.group(1), 16)
            path = m.group(3).strip()
            if path.startswith("/"):
                name = (os.path.basename(path), "file")
            elif path:
                name = (path, "")
            elif size >= 1 << 20:
                name = (f"anonymous mapping of {size / (1 << 20):,.1f} MiB", "anonymous memory")
            else:
                name = ("anonymous mappings under 1 MiB", "anonymous memory")
        elif line.startswith("Rss:") and name:
            rows[name] = rows.get(name, 0) + int(line.split()[1]) * 1024
    total = sum(rows.values())
    return (_top(rows, total) if total else []), total


def smaps_peak(out, cmd, period=0.02, on_sample=None):
    """Runs cmd, reading its smaps every `period` seconds, and writes the one with the largest
    resident set to `out`. Returns cmd's exit code. on_sample(kib), when given, is called after
    each sample with the resident KiB of that sample's smaps (a test's hook to let the command go
    on). The resident set is summed from the smaps read, not taken from /proc/PID/status: the two
    are separate reads, and a CI run once kept an 8 MB map after status had reported 64 MiB."""
    p = subprocess.Popen(cmd)
    best, smaps = -1, ""
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/smaps") as f:
                text = f.read()
            rss = sum(int(line.split()[1]) for line in text.splitlines()
                      if line.startswith("Rss:"))
            if rss > best:
                best, smaps = rss, text
            if on_sample:
                on_sample(rss)
        except (OSError, IndexError, ValueError):
            pass  # the process is starting or ending
        time.sleep(period)
    with open(out, "w") as f:
        f.write(smaps)
    return p.returncode


def record(tool, cmd, out_dir, label, env, run):
    """Runs cmd under tool and returns {tool, top, total_text} (or {tool, error}). run(label, cmd,
    env) is the runner's logged subprocess call; it raises on a non-zero exit."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, label)
    try:
        if tool == "perf":
            data = base + ".perf.data"
            run(f"profile-{label}", ["perf", "record", "-q", "-F", "999", "-o", data, "--"] + cmd,
                env)
            p, _ = run(f"profile-{label}-report", ["perf", "report", "-i", data, "--stdio",
                                                   "--no-children", "--sort", "dso,symbol",
                                                   "--percent-limit", "0.3"], None)
            return {"tool": tool, "top": parse_perf(p.stdout)}
        if tool == "callgrind":
            out = base + ".callgrind.out"
            run(f"profile-{label}", ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
                + cmd, env)
            p, _ = run(f"profile-{label}-annotate", ["callgrind_annotate", out], None)
            top, total = parse_callgrind(p.stdout)
            return {"tool": tool, "top": top,
                    "total_text": f"{total:,} instructions" if total else None}
        if tool == "massif":
            out = base + ".massif.out"
            run(f"profile-{label}", ["valgrind", "--tool=massif", f"--massif-out-file={out}"]
                + cmd, env)
            with open(out) as f:
                top, total = parse_massif(f.read())
            return {"tool": tool, "top": top,
                    "total_text": f"peak heap {total / 1e6:,.1f} MB" if total else None}
        if tool == "smaps":
            out = base + ".smaps"
            run(f"profile-{label}", [sys.executable, os.path.abspath(__file__), "--smaps-peak", out,
                                     "--"] + cmd, env)
            with open(out) as f:
                top, total = parse_smaps(f.read())
            return {"tool": tool, "top": top,
                    "total_text": f"resident {total / 1e6:,.1f} MB at the sampled peak"
                    if total else None}
        return {"tool": tool, "error": f"unknown profiler '{tool}'"}
    except Exception as e:  # a profile that fails is reported, never fatal to the run
        return {"tool": tool, "error": str(e)}


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--smaps-peak" or args[2] != "--":
        sys.exit("usage: bench_probe.py --smaps-peak OUT -- CMD...")
    sys.exit(smaps_peak(args[1], args[3:]))
