"""W5 (a hyper-parameter search with pruning) for bench/run_bench.py: the plans it runs, derived
from examples/search/w5.yaml by rewriting its text, and what it reads back from a run.

nnfleet's side: `nnfleet train <plan> --workers N --out DIR` writes DIR/results.json with a
`search` object (metric, mode, epochs_trained, ...) and per trial (model) its `parameters`,
`status` ("done" or "pruned") and `rungs` ([{epochs, value, decision}], the values the scheduler
ranked), as /work/notes/search_design.md "Results" defines. The peer's side is
bench/peers/optuna_w5.py, whose JSON carries the same figures. Both sides reduce a run to:
  wall (s), epochs_trained, trials, pruned, best {name, val, test}, fingerprint
where the fingerprint lists per trial what it drew, how it ended and what it reported, so that
two runs (1 worker and N) are the same study exactly when their fingerprints are equal.
No torch or optuna here: the harness and its tests import this cheaply.
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PLAN = os.path.join(REPO, "examples", "search", "w5.yaml")

# Plan keys a build without search support names as unknown (plan_problems.cpp's message).
SEARCH_KEYS = ("search", "space", "scheduler", "when", "repeat", "parameters")


class PlanRewriteError(Exception):
    """The example plan does not have the shape the rewrite expects; the message says which."""


def _line_block(lines, i):
    """(start, end) of the YAML value that starts on line i: a flow value up to its closing
    bracket, or a block value: the lines after it indented deeper than it (blank lines and
    comments inside included)."""
    m = re.match(r"(\s*)[\w-]+:\s*(.*)$", lines[i])
    indent, rest = len(m.group(1)), re.sub(r"\s+#.*$", "", m.group(2))
    end = i + 1
    if rest:
        depth = rest.count("{") + rest.count("[") - rest.count("}") - rest.count("]")
        while depth > 0 and end < len(lines):
            depth += sum(lines[end].count(c) for c in "{[") - sum(
                lines[end].count(c) for c in "}]")
            end += 1
        return i, end
    last = i + 1
    while end < len(lines):
        s = lines[end]
        if s.strip() and not s.lstrip().startswith("#"):
            if len(s) - len(s.lstrip()) <= indent:
                break
            last = end + 1
        end += 1
    return i, last


def _find_key(lines, key, path, under=None):
    """The index of the one line `key:` (inside the block of `under:` when given)."""
    lo, hi = 0, len(lines)
    if under is not None:
        lo, hi = _line_block(lines, _find_key(lines, under, path))
    found = [i for i in range(lo, hi) if re.match(rf"\s*{key}:(\s|$)", lines[i])]
    if len(found) != 1:
        raise PlanRewriteError(f"failed to derive a W5 plan from {path}: expected one '{key}:' "
                               f"line{' inside ' + under + ':' if under else ''}, got "
                               f"{len(found)}; update bench/w5_bench.py")
    return found[0]


def with_trials(text, trials, path):
    """The plan's text with `search: trials:` set to `trials`."""
    lines = text.split("\n")
    i = _find_key(lines, "trials", path, under="search")
    lines[i] = re.sub(r"trials:\s*\d+", f"trials: {trials}", lines[i], count=1)
    return "\n".join(lines)


def max_epochs_of(text, path):
    """The scheduler's max_epochs (the epochs every trial trains when nothing is pruned)."""
    lines = text.split("\n")
    i = _find_key(lines, "scheduler", path, under="search")
    s, e = _line_block(lines, i)
    found = re.findall(r"max_epochs:\s*(\d+)", "\n".join(lines[s:e]))
    if len(found) != 1:
        raise PlanRewriteError(f"failed to derive the unpruned W5 plan from {path}: expected "
                               f"one max_epochs in search.scheduler, got {len(found)}")
    return int(found[0])


def without_pruning(text, path):
    """The plan's text with its scheduler replaced by `none` over the same max_epochs: the same
    trials (same draws: they depend on the seed, the trial and the parameter only), each
    trained to the end. A budget (max_total_epochs, time_limit) would cut trials from the
    unpruned run, so it goes too."""
    epochs = max_epochs_of(text, path)
    lines = text.split("\n")
    i = _find_key(lines, "scheduler", path, under="search")
    s, e = _line_block(lines, i)
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[s:e] = [f"{indent}scheduler: {{none: {{max_epochs: {epochs}}}}}"]
    lo, hi = _line_block(lines, _find_key(lines, "search", path))
    budget = [j for j in range(lo, hi)
              if re.match(r"\s*(max_total_epochs|time_limit):", lines[j])]
    for j in reversed(budget):
        del lines[j]
    return "\n".join(lines)


def absolute_paths(text, plan_dir):
    """Relative file names (`./` or `../`) made absolute against the plan's folder, so that a
    derived plan written elsewhere reads the same files (nnfleet takes them from the plan's
    folder)."""
    def repl(m):
        return m.group(1) + os.path.normpath(os.path.join(plan_dir, m.group(2)))
    return re.sub(r"""([\s{\[,:'"])(\.{1,2}/[^\s,}\]'"#]+)""", repl, text)


def derive_plan(src, out, trials=None, unpruned=False):
    """Writes the plan `src` to `out` with `trials` (when given) and without pruning (when
    asked), its relative file names made absolute. Returns out."""
    with open(src) as f:
        text = f.read()
    if trials is not None:
        text = with_trials(text, trials, src)
    if unpruned:
        text = without_pruning(text, src)
    text = absolute_paths(text, os.path.dirname(os.path.abspath(src)))
    what = ", ".join(x for x in (f"{trials} trials" if trials else "",
                                 "unpruned" if unpruned else "") if x)
    with open(out, "w") as f:
        f.write(f"# {os.path.relpath(src, REPO)} ({what or 'as is'}), for bench/run_bench.py\n"
                + text)
    return out


def trial_value(m, metric):
    """A trial's metric: results.json's final metric, else its last rung's value."""
    v = (m.get("metrics") or {}).get(metric)
    if v is None and m.get("rungs"):
        v = m["rungs"][-1]["value"]
    return v


def nnfleet_summary(res):
    """W5's figures from an nnfleet results.json (parsed): raises KeyError naming what a build
    without search support leaves out."""
    if "search" not in res:
        raise KeyError("results.json has no 'search' object")
    s = res["search"]
    metric, mode = s["metric"], s.get("mode", "max")
    models = res["models"]
    done = [m for m in models if m["status"] == "done" and trial_value(m, metric) is not None]
    best = None
    if done:
        sign = 1 if mode == "max" else -1
        b = max(done, key=lambda m: sign * trial_value(m, metric))
        best = {"name": b["name"], "val": trial_value(b, metric),
                "test": (b.get("metrics") or {}).get("test_accuracy"),
                "parameters": b.get("parameters", {})}
    fp = [{"name": m["name"], "parameters": m.get("parameters", {}), "status": m["status"],
           "rungs": [[r["epochs"], r["value"], r["decision"]] for r in m.get("rungs", [])]}
          for m in sorted(models, key=lambda m: m["name"])]
    return {"epochs_trained": s["epochs_trained"], "trials": len(models),
            "pruned": sum(m["status"] == "pruned" for m in models), "best": best,
            "metric": metric, "fingerprint": fp}


def peer_summary(r):
    """W5's figures from bench/peers/optuna_w5.py's JSON, in nnfleet_summary's shape."""
    b = r.get("best")
    return {"epochs_trained": r["epochs_trained"], "trials": r["trials"], "pruned": r["pruned"],
            "best": b and {"name": f"trial {b['number']}", "val": b["val_accuracy"],
                           "test": b["test_accuracy"], "parameters": b["params"]},
            "metric": "val_accuracy", "fingerprint": r["fingerprint"]}


def same_study(a, b):
    """(same?, the first difference or None) of two summaries' fingerprints. The difference
    names the trial and what differs, without values (they go to the logs)."""
    fa, fb = a["fingerprint"], b["fingerprint"]
    if len(fa) != len(fb):
        return False, "the runs hold different numbers of trials"
    for x, y in zip(fa, fb):
        keys = [k for k in x if x[k] != y.get(k)]
        if keys:
            who = x.get("name", f"trial {x.get('number')}")
            return False, f"{who}: {', '.join(keys)}"
    return True, None


def unavailable_reason(log_text):
    """Why this nnfleet cannot run the W5 plan, when its log says it lacks search support."""
    keys = sorted(set(re.findall(r"unknown key '(\w+)'", log_text)) & set(SEARCH_KEYS))
    if keys:
        return (f"this nnfleet does not know the plan key(s) {', '.join(keys)} (search support, "
                "issue 33)")
    return None
