# The two seed rewrites of README.md's "From Python", run as written, on a small stand-in for
# Fashion-MNIST (300 images in the package's IDX format, through $NNFLEET_FASHION_MNIST) so that
# the test takes seconds; on the real data they are the same code.
import gzip
import os
import re
import struct
from pathlib import Path

import numpy as np

README = Path(os.environ.get("NNFLEET_SOURCE_DIR", Path(__file__).parents[2])) / "README.md"


def python_blocks():
    text = README.read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def write_idx(folder, prefix, n, seed):
    r = np.random.default_rng(seed)
    y = r.integers(0, 10, n).astype(np.uint8)
    x = r.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 2 * c:2 * c + 6, 4:24] = 255
    with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + x.tobytes())
    with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + y.tobytes())


def test_the_seed_rewrites_run_as_written(tmp_path, monkeypatch, capsys):
    blocks = python_blocks()
    assert len(blocks) == 2
    for b in blocks:
        assert len(b.strip().splitlines()) < 15
    write_idx(tmp_path, "train", 300, 1)
    write_idx(tmp_path, "t10k", 50, 2)
    monkeypatch.setenv("NNFLEET_FASHION_MNIST", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README grid", "exec"), {})
    out = capsys.readouterr().out
    # Outside a terminal the run prints a bar and one line per finished model ("cnn: done, 3/3
    # epochs, ..."), then the script its ranking.
    lines = [line.split() for line in out.splitlines()]
    assert sum(len(l) > 2 and l[0].endswith(":") and l[1] == "done," and l[2] == "3/3"
               for l in lines) == 5
    ranked = [l for l in lines if l and l[0].startswith(("mlp-", "cnn"))
              and not l[0].endswith(":")]
    assert sorted(r[0] for r in ranked) == ["cnn", "mlp-128-1", "mlp-128-2", "mlp-32-1",
                                           "mlp-32-2"]
    assert all(r[1] == "done" and r[3] == "3" for r in ranked)
    assert (tmp_path / "cnn.keras").exists()
    exec(compile(blocks[1], "README predict", "exec"), {})
    out = capsys.readouterr().out
    assert "(300, 10) (300,)" in out
    assert "Conv2D" in out


def test_the_quick_start_runs_as_written(tmp_path, monkeypatch, capsys):
    # README's "Quick start from Python" (tests/install/pip_install_test.sh runs it too, with the
    # package pip installed from a fresh clone).
    section = README.read_text().split("## Quick start from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1 and len(blocks[0].strip().splitlines()) <= 12
    write_idx(tmp_path, "train", 300, 1)
    write_idx(tmp_path, "t10k", 50, 2)
    monkeypatch.setenv("NNFLEET_FASHION_MNIST", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(blocks[0], "README quick start", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    # One line per finished model, the frame's five rows ranked 1..5, the best model's
    # predictions for five images beside their labels.
    assert sum(line.startswith("mlp-") and ": done, 2/2 epochs" in line for line in out) == 5
    rows = [line.split() for line in out if re.match(r"^\d+\s+mlp-\d+\s", line)]
    assert sorted(r[1] for r in rows) == ["mlp-128", "mlp-16", "mlp-256", "mlp-32", "mlp-64"]
    assert sorted(int(r[3]) for r in rows) == [1, 2, 3, 4, 5]
    run = scope["run"]
    assert scope["best"] is run.best.model and run.best is run[run.ranking[0]]
    assert (tmp_path / "report.html").stat().st_size > 10_000
    assert out[-1].startswith("[") and len(out[-1].split("]")[0].split()) == 5
