# examples/transformer_forecast.yaml (a Transformer encoder with MultiHeadAttention and learned
# positional embeddings, from a Keras 3 file made by tools/make_transformer_forecast.py) trains
# from Python for 1 epoch: its data and model are written into a temporary folder and the plan
# copied there with its paths and epochs changed.
import os
import subprocess
import sys
from pathlib import Path

import nnfleet

SOURCE = Path(os.environ.get("NNFLEET_SOURCE_DIR", Path(__file__).parents[2]))


def test_the_transformer_example_trains_for_one_epoch(tmp_path):
    done = subprocess.run(["/usr/bin/python3", str(SOURCE / "tools" / "make_transformer_forecast.py"),
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = (SOURCE / "examples" / "transformer_forecast.yaml").read_text()
    plan = plan.replace("../build/bench-data/transformer/", str(tmp_path) + "/")
    plan = plan.replace("epochs: 20", "epochs: 1")
    (tmp_path / "plan.yaml").write_text(plan)
    run = nnfleet.train_plan(str(tmp_path / "plan.yaml"), out=str(tmp_path / "run"), verbose=0)
    assert len(run) == 2
    for m in run:
        assert m.status == "done", m.message
        assert m.epochs == 1
        assert 0 < m.metrics["test_mae"] < 2
        # The trained model reads back with its attention layer.
        assert "MultiHeadAttention" in m.model.summary(print_fn=lambda line: None)
