"""W5's peer (bench/peers/optuna_w5.py), run for real in its quick form: Optuna with PyTorch
objectives, 1 and 2 pinned workers sharing a journal-file study. Checks the JSON's shape and that
its figures agree with each other (epochs against pruning decisions, the best trial against the
trials, accuracies in [0, 1]), and that the same run twice is the same study. No timing.
Needs python3-torch and python3-optuna (scripts/setup). Run by CTest: /usr/bin/python3 -m pytest.
"""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(REPO, "bench", "peers", "optuna_w5.py")
sys.path.insert(0, os.path.join(REPO, "bench", "peers"))
import optuna_w5  # noqa: E402

QUICK = ["--trials", "6", "--train", "512", "--val", "256", "--test", "512"]
KEYS = {"peer", "optuna", "torch", "workers", "seed", "trials_asked", "n_train", "n_val", "n_test",
        "max_epochs", "pruner", "wall_seconds", "load_average", "trials", "epochs_trained",
        "complete", "pruned", "failed", "best", "per_worker", "fingerprint", "fingerprint_sha256"}


def run_peer(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    p = subprocess.run([sys.executable, PEER, "--out", str(out), *args], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())


def check_figures(r, workers, trials, max_epochs):
    assert set(r) == KEYS
    assert r["optuna"].startswith("3.") and r["workers"] == workers
    assert r["trials"] == r["trials_asked"] == trials == len(r["fingerprint"])
    assert [t["number"] for t in r["fingerprint"]] == list(range(trials))
    assert sum(w["trials"] for w in r["per_worker"]) == trials
    assert sorted(w["core"] for w in r["per_worker"]) == sorted(
        os.sched_getaffinity(0))[:workers]
    assert r["failed"] == 0 and r["complete"] + r["pruned"] == trials and r["complete"] >= 1
    assert r["wall_seconds"] > 0 and len(r["load_average"]) == 2
    assert all(0 < w["cpu_seconds"] and 0 < w["seconds"] for w in r["per_worker"])
    epochs = 0
    for t in r["fingerprint"]:
        steps = [s for s, _ in t["values"]]
        assert steps == list(range(1, len(steps) + 1))  # one report per epoch, from epoch 1
        assert all(0 <= v <= 1 for _, v in t["values"])
        # A finished trial trained every epoch; a pruned one stopped before the last.
        assert (len(steps) == max_epochs) == (t["state"] == "complete")
        assert t["state"] in ("complete", "pruned") and 1 <= len(steps) <= max_epochs
        assert t["params"]["family"] in ("mlp", "cnn")
        assert ("depth" in t["params"]) == (t["params"]["family"] == "mlp")
        epochs += len(steps)
    assert r["epochs_trained"] == epochs
    finished = [t for t in r["fingerprint"] if t["state"] == "complete"]
    best = max(finished, key=lambda t: (t["values"][-1][1], -t["number"]))
    b = r["best"]
    assert (b["number"], b["val_accuracy"], b["epochs"]) == (
        best["number"], best["values"][-1][1], max_epochs)
    assert b["params"] == best["params"] and 0 <= b["test_accuracy"] <= 1


def test_one_and_two_workers_give_consistent_figures(tmp_path):
    one = run_peer(tmp_path, "one", "--workers", "1", *QUICK)
    check_figures(one, 1, 6, 9)
    two = run_peer(tmp_path, "two", "--workers", "2", *QUICK)
    check_figures(two, 2, 6, 9)
    # The fingerprint names what differs; its hash follows it.
    same, diffs = optuna_w5.same_study(one, two)
    assert same == (one["fingerprint_sha256"] == two["fingerprint_sha256"])
    assert same == (diffs == [])
    p = subprocess.run([sys.executable, PEER, "--compare", str(tmp_path / "one.json"),
                        str(tmp_path / "two.json")], capture_output=True, text=True)
    assert json.loads(p.stdout) == {"same": same, "differences": diffs}
    assert p.returncode == (0 if same else 1)


def test_the_same_run_twice_is_the_same_study_and_unpruned_trains_every_epoch(tmp_path):
    small = ["--trials", "4", "--train", "256", "--val", "128", "--test", "128",
             "--max-epochs", "3", "--workers", "1"]
    a = run_peer(tmp_path, "a", *small)
    b = run_peer(tmp_path, "b", *small)
    assert optuna_w5.same_study(a, b) == (True, [])
    assert a["fingerprint_sha256"] == b["fingerprint_sha256"]
    full = run_peer(tmp_path, "full", *small, "--no-prune")
    check_figures(full, 1, 4, 3)
    assert (full["pruner"], full["pruned"], full["epochs_trained"]) == ("none", 0, 4 * 3)
    # The same seed draws the same trials whatever the pruner decides.
    assert [t["params"] for t in full["fingerprint"]] == [t["params"] for t in a["fingerprint"]]
