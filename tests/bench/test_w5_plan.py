"""W5's harness (bench/w5_bench.py): the plans bench/run_bench.py derives from
examples/search/w5.yaml by rewriting its text (fewer trials; the scheduler replaced by `none`),
and the figures and the "same study?" fingerprint it reads from a search's results.json.
The plan here is written in search_design.md's format. Run by CTest: /usr/bin/python3 -m pytest.
"""
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import w5_bench  # noqa: E402

PLAN = """seed: 7
data:
  train: {idx_images: ../../build/bench-data/w5/train-images.gz, idx_labels: "./y.gz"}
  scale: 0.00392156862745098
search:
  trials: 81
  sampler: random
  space:
    family: {choice: [mlp, cnn]}
    lr: {loguniform: [1.0e-4, 1.0e-2]}
  scheduler:
    # rungs at 1, 3 and 9 epochs
    successive_halving: {reduction_factor: 3, min_epochs: 1, max_epochs: 9, brackets: 1}

  metric: val_accuracy
  mode: max
  max_total_epochs: 300
  time_limit: 600
models:
  - name: "trial-{trial}"
    layers: [{Flatten: {}}, {Dense: {units: 10, activation: softmax}}]
"""


def test_quick_plans_change_only_the_number_of_trials():
    out = w5_bench.with_trials(PLAN, 9, "w5.yaml")
    assert out == PLAN.replace("  trials: 81\n", "  trials: 9\n")


def test_the_unpruned_plan_trains_every_trial_to_the_schedulers_last_epoch():
    out = w5_bench.without_pruning(PLAN, "w5.yaml")
    lines = out.split("\n")
    assert "  scheduler: {none: {max_epochs: 9}}" in lines
    assert "successive_halving" not in out and "rungs at" not in out
    # A budget would cut trials from the unpruned run; everything else stays.
    assert "max_total_epochs" not in out and "time_limit" not in out
    kept = [line for line in PLAN.split("\n") if "max_total_epochs" not in line
            and "time_limit" not in line]
    assert [line for line in lines if line in kept] == [
        line for line in kept if line in lines]
    assert "  metric: val_accuracy" in lines and "  trials: 81" in lines
    flow = PLAN.replace("  scheduler:\n    # rungs at 1, 3 and 9 epochs\n    successive_halving:",
                        "  scheduler: {successive_halving:").replace("brackets: 1}\n",
                                                                   "brackets: 1}}\n")
    assert "  scheduler: {successive_halving: {" in flow
    assert w5_bench.without_pruning(flow, "w5.yaml") == out


@pytest.mark.parametrize("text,rule", [
    (PLAN.replace("  trials: 81\n", ""), "expected one 'trials:' line inside search:"),
    (PLAN.replace("max_epochs: 9", "max_samples: 90000"), "expected one max_epochs"),
    (PLAN.replace("search:", "find:"), "expected one 'search:' line"),
])
def test_a_plan_of_another_shape_is_named_with_what_was_expected(text, rule):
    with pytest.raises(w5_bench.PlanRewriteError, match=rule) as e:
        w5_bench.without_pruning(w5_bench.with_trials(text, 3, "examples/search/w5.yaml"),
                                 "examples/search/w5.yaml")
    assert "examples/search/w5.yaml" in str(e.value)


def test_a_derived_plan_reads_the_same_files_from_another_folder(tmp_path):
    src_dir = tmp_path / "examples" / "search"
    src_dir.mkdir(parents=True)
    src = src_dir / "w5.yaml"
    src.write_text(PLAN)
    out = w5_bench.derive_plan(str(src), str(tmp_path / "w5-quick.yaml"), trials=9,
                               unpruned=True)
    text = open(out).read()
    assert f"idx_images: {tmp_path}/build/bench-data/w5/train-images.gz," in text
    assert f'idx_labels: "{src_dir}/y.gz"' in text
    assert "trials: 9" in text and "{none: {max_epochs: 9}}" in text
    assert text.startswith("# ") and "9 trials, unpruned" in text.split("\n")[0]


def results(order, rung_values, status=None):
    """A search's results.json (search_design.md "Results") with trials named in `order`."""
    models = []
    for name in order:
        vals = rung_values[name]
        st = (status or {}).get(name, "done" if len(vals) == 3 else "pruned")
        rungs = [{"epochs": e, "value": v, "decision": "promoted"}
                 for e, v in zip((1, 3, 9), vals)]
        rungs[-1]["decision"] = "final" if st == "done" else "pruned"
        models.append({"name": name, "status": st, "parameters": {"lr": 0.001, "family": "mlp"},
                       "rungs": rungs, "metrics": {"val_accuracy": vals[-1],
                                                    "test_accuracy": vals[-1] - 0.01}})
    return {"models": models, "search": {"metric": "val_accuracy", "mode": "max",
                                         "epochs_trained": 19, "rungs": [1, 3, 9]}}


def test_nnfleet_results_give_the_figures_and_a_fingerprint_in_trial_order():
    vals = {"trial-0": [0.7, 0.8, 0.84], "trial-1": [0.5], "trial-2": [0.72, 0.82, 0.86],
            "trial-3": [0.69, 0.75]}
    s = w5_bench.nnfleet_summary(results(["trial-2", "trial-0", "trial-3", "trial-1"], vals))
    assert (s["epochs_trained"], s["trials"], s["pruned"]) == (19, 4, 2)
    assert s["best"] == {"name": "trial-2", "val": 0.86, "test": 0.86 - 0.01,
                         "parameters": {"lr": 0.001, "family": "mlp"}}
    assert [t["name"] for t in s["fingerprint"]] == ["trial-0", "trial-1", "trial-2", "trial-3"]
    assert s["fingerprint"][1]["rungs"] == [[1, 0.5, "pruned"]]
    # The same trials written in another order by more workers: the same study.
    again = w5_bench.nnfleet_summary(results(["trial-0", "trial-1", "trial-2", "trial-3"], vals))
    assert w5_bench.same_study(s, again) == (True, None)
    moved = dict(vals, **{"trial-3": [0.69, 0.7501]})
    other = w5_bench.nnfleet_summary(results(sorted(vals), moved))
    assert w5_bench.same_study(s, other) == (False, "trial-3: rungs")
    # min mode takes the smallest metric; only finished trials can be best.
    low = results(sorted(vals), vals)
    low["search"]["mode"] = "min"
    assert w5_bench.nnfleet_summary(low)["best"]["name"] == "trial-0"


def test_a_build_without_search_is_told_apart_from_a_failure():
    with pytest.raises(KeyError, match="no 'search' object"):
        w5_bench.nnfleet_summary({"models": []})
    log = ("failed to load plan 'w5.yaml': w5.yaml:5: search: unknown key 'search'; expected "
           "one of: data, defaults, models, seed")
    assert "search" in w5_bench.unavailable_reason(log)
    assert w5_bench.unavailable_reason("models did not finish: trial-03 (failed: nan)") is None


def test_peer_results_take_the_same_shape():
    fp = [{"number": 0, "params": {"family": "mlp"}, "state": "pruned", "values": [[1, 0.5]]}]
    r = {"epochs_trained": 1, "trials": 1, "pruned": 1, "best": None, "fingerprint": fp}
    s = w5_bench.peer_summary(r)
    assert (s["epochs_trained"], s["trials"], s["pruned"], s["best"]) == (1, 1, 1, None)
    r2 = json.loads(json.dumps(r))
    r2["fingerprint"][0]["state"] = "complete"
    assert w5_bench.same_study(s, w5_bench.peer_summary(r2)) == (False, "trial 0: state")


# A stand-in for `nnfleet train PLAN --workers N --json --out DIR` that writes a search's
# results.json as search_design.md defines it: trial k reaches rung 1, 3 or 9 epochs (every
# ninth trial finishes, every third reaches 3 epochs), or trains 9 epochs under `none`; with
# FAKE_DIFFER set, what it reports depends on the number of workers.
FAKE_NNFLEET = r'''#!/usr/bin/python3
import json, os, re, sys
plan, out = sys.argv[2], sys.argv[sys.argv.index("--out") + 1]
workers = int(sys.argv[sys.argv.index("--workers") + 1])
text = open(plan).read()
trials = int(re.search(r"trials: (\d+)", text).group(1))
unpruned = "{none: {max_epochs: 9}}" in text
shift = 0.001 * workers if os.environ.get("FAKE_DIFFER") else 0
models, epochs = [], 0
for k in range(trials):
    reached = 3 if unpruned or k % 9 == 0 else 2 if k % 3 == 0 else 1
    budgets = [9] if unpruned else [1, 3, 9][:reached]
    rungs = [{"epochs": e, "value": 0.5 + 0.03 * e + 0.001 * k + shift, "decision": "promoted"}
             for e in budgets]
    done = reached == 3
    rungs[-1]["decision"] = "final" if done else "pruned"
    m = {"name": f"trial-{k:02d}", "status": "done" if done else "pruned",
         "parameters": {"lr": 0.001 * (k + 1)}, "rungs": rungs, "metrics": {}}
    if done:
        m["metrics"] = {"val_accuracy": rungs[-1]["value"], "test_accuracy": 0.8 + 0.001 * k}
    models.append(m)
    epochs += budgets[-1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump({"models": models, "search": {"metric": "val_accuracy", "mode": "max",
                                            "epochs_trained": epochs}}, f)
print(json.dumps({"event": "start"}))
print(json.dumps({"event": "run_end", "makespan_seconds": 0.1, "peak_rss_bytes": 1}))
'''


def bench_with_fake_nnfleet(tmp_path, monkeypatch):
    import run_bench
    fake = tmp_path / "nnfleet"
    fake.write_text(FAKE_NNFLEET)
    fake.chmod(0o755)
    plan = tmp_path / "w5.yaml"
    plan.write_text(PLAN)
    monkeypatch.setattr(w5_bench, "PLAN", str(plan))
    a = run_bench.argparse.Namespace(quick=True, rounds=1, build="build", nnfleet=str(fake),
                                     md=str(tmp_path / "quick.md"), profiler="none")
    b = run_bench.Bench(a)
    b.work = str(tmp_path / "work")
    os.makedirs(os.path.join(b.work, "logs"))
    b.round = 1
    return b


def test_the_runner_reads_nnfleets_search_unpruned_and_on_one_worker(tmp_path, monkeypatch):
    b = bench_with_fake_nnfleet(tmp_path, monkeypatch)
    b.w5_fleet()
    b.round = 0
    b.w5_nnfleet_once()
    v = b.values
    # --quick: 9 trials; 1 and 3 reach 3 epochs, 0 trains 9: 6 x 1 + 2 x 3 + 9.
    assert v["w5.trials.nnfleet"] == [9] and v["w5.epochs_trained.nnfleet"] == [6 + 6 + 9]
    assert v["w5.pruned.nnfleet"] == [8] and v["w5.best_test.nnfleet"] == [0.8]
    assert v["w5.best_val.nnfleet"] == [pytest.approx(0.5 + 0.27)]
    assert v["w5.epochs_trained.unpruned"] == [81] and v["w5.pruned.unpruned"] == [0]
    assert v["w5.best_val.unpruned"] == [pytest.approx(0.5 + 0.27 + 0.008)]
    assert b.info["w5.best.unpruned"] == ["trial-08"]
    assert b.info["w5.same.nnfleet"] == {"same": True, "difference": None}
    assert set(v) >= {"w5.wall.nnfleet", "w5.wall1.nnfleet", "w5.wall.unpruned"}
    derived = open(os.path.join(b.work, "w5-unpruned-quick.yaml")).read()
    assert "trials: 9" in derived and "{none: {max_epochs: 9}}" in derived
    assert b.commands["nnfleet-w5"].endswith(f"--workers {b.n} --json --out "
                                             f"{b.work}/r1-nnfleet-w5")


def test_the_runner_says_when_one_worker_gives_another_study(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_DIFFER", "1")
    b = bench_with_fake_nnfleet(tmp_path, monkeypatch)
    monkeypatch.setattr(b, "n", 2)
    b.w5_fleet()
    b.w5_nnfleet_once()
    assert b.info["w5.same.nnfleet"] == {"same": False, "difference": "trial-00: rungs"}


def test_a_missed_pruning_target_is_not_profiled(tmp_path, monkeypatch):
    import bench_report
    b = bench_with_fake_nnfleet(tmp_path, monkeypatch)
    monkeypatch.setattr(bench_report, "Run", lambda raw: raw)
    monkeypatch.setattr(bench_report, "missed_scenarios", lambda run: ["w5-pruning"])
    monkeypatch.setattr(b, "raw", lambda: {})
    b.profile_missed()
    assert b.profiles == {"w5-pruning": {"skipped": bench_report.UNPROFILED["w5-pruning"]}}
