# examples/search/w5.py (W5 from Python) runs as written: on a small stand-in for Fashion-MNIST
# ($NNFLEET_FASHION_MNIST) with 6 trials, so that it takes seconds; on the real data and its 81
# trials it is the same code (BENCHMARKS.md has the plan's figures).
import os
import subprocess
import sys
from pathlib import Path

from test_readme import write_idx

EXAMPLE = Path(os.environ.get("NNFLEET_SOURCE_DIR", Path(__file__).parents[2])) / "examples" / "search" / "w5.py"


def test_the_w5_example_runs_and_prunes(tmp_path):
    write_idx(tmp_path, "train", 400, 1)
    write_idx(tmp_path, "t10k", 60, 2)
    env = dict(os.environ, NNFLEET_FASHION_MNIST=str(tmp_path))
    done = subprocess.run([sys.executable, str(EXAMPLE), "6", str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2].startswith("best: trial-") and "test_accuracy=" in lines[-2]
    # 6 trials halved by 3 over 1, 3 and 9 epochs: 2 reach 3 epochs, 1 reaches 9.
    assert lines[-1] == "5 of 6 trials pruned"
    assert (tmp_path / "run" / "trials.csv").exists()
