# README.md's "Search" examples, run as written (each under 15 lines): the plan through the CLI
# and the Python search, on a small stand-in for Fashion-MNIST (IDX files through
# $NNFLEET_FASHION_MNIST) so that the test takes seconds.
import csv
import json
import re
import subprocess

from conftest import NNFLEET
from test_readme import README, write_idx


def blocks(lang):
    section = README.read_text().split("\n## Search\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def test_the_search_plan_runs_as_written(tmp_path, monkeypatch):
    [plan] = blocks("yaml")
    assert len(plan.strip().splitlines()) < 15
    write_idx(tmp_path, "train", 300, 1)
    write_idx(tmp_path, "t10k", 50, 2)
    (tmp_path / "search.yaml").write_text(plan)
    env = {"NNFLEET_FASHION_MNIST": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([NNFLEET, "train", "search.yaml", "--out", "run", "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # 27 trials: 27 train 1 epoch, the best 9 reach 3, the best 3 reach 9 (63 epochs).
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["search"]["epochs_trained"] == 27 + 9 * 2 + 3 * 6
    statuses = [m["status"] for m in results["models"]]
    assert statuses.count("done") == 3 and statuses.count("pruned") == 24
    rows = list(csv.DictReader(open(tmp_path / "run" / "trials.csv")))
    assert len(rows) == 27
    assert {"units", "lr", "rung_1", "rung_3", "rung_9"} <= set(rows[0])
    for r in rows:
        assert 16 <= int(r["units"]) <= 256 and 1e-4 <= float(r["lr"]) <= 1e-2


def test_the_python_search_runs_as_written(tmp_path, monkeypatch, capsys):
    [code] = blocks("python")
    assert len(code.strip().splitlines()) < 15
    write_idx(tmp_path, "train", 300, 1)
    write_idx(tmp_path, "t10k", 50, 2)
    monkeypatch.setenv("NNFLEET_FASHION_MNIST", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "README search", "exec"), scope)
    run = scope["run"]
    statuses = [t["status"] for t in run.trials]
    # 9 trials halved by 2 over 1, 2 and 4 epochs: 4 reach 2, 2 reach 4.
    assert len(statuses) == 9 and statuses.count("done") == 2 and statuses.count("pruned") == 7
    assert run.best.status == "done" and "lr" in run.best.parameters
    assert run.best.name in capsys.readouterr().out
