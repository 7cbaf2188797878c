# Model files and figures as Keras keeps them: a trained model's file, loaded and saved again,
# evaluates with its own loss and metrics (compile()); with restore_best_weights a model's metrics
# are those of the epoch whose weights it kept.
import json

import numpy as np
import pytest

import nnfleet
from conftest import FIT, MODELS


@pytest.mark.parametrize("ext", ["keras", "h5"])
def test_a_saved_file_evaluates_with_its_own_loss(tmp_path, data, ext):
    x, y = data
    run = nnfleet.train(MODELS[1:], x, y, progress=False, out=tmp_path / "run", **FIT)
    original = run["cnn"].model_file
    want = nnfleet.load_model(original).evaluate(x, y)
    assert list(want) == ["loss", "accuracy"]
    nnfleet.load_model(original).save(tmp_path / f"again.{ext}")
    assert nnfleet.load_model(tmp_path / f"again.{ext}").evaluate(x, y) == want


def test_the_engine_reports_the_kept_epochs_figures_and_the_last_apart(tmp_path, data):
    # Early stopping on the training loss in "max" mode: epoch 1 is best (the loss falls), the
    # model stops 2 epochs later and keeps epoch 1's weights; its metrics are epoch 1's.
    x, y = data
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    fit = dict(FIT, epochs=6, early_stopping={"monitor": "loss", "mode": "max", "patience": 2,
                                              "restore_best_weights": True})
    plan = {"seed": 5, "data": {"train": {"x": "x.npy", "y": "y.npy"}, "validation_split": 0.25},
            "defaults": fit, "models": MODELS[:1]}
    (tmp_path / "plan.yaml").write_text(json.dumps(plan))
    r = nnfleet._core.train(str(tmp_path / "plan.yaml"), "", "", {}, 1, str(tmp_path / "run"),
                            False, 2.0, "keras", nnfleet._core.Progress.QUIET, None)
    m = r.models[0]
    assert m.best.epoch == 1 and len(m.history) == 3
    assert m.metrics == m.history[0].values
    assert m.last_metrics == m.history[2].values
    with pytest.raises(AttributeError):
        m.last_metrics = []  # read-only
