# Model files written from Python keep what Keras keeps: a trained model's file, loaded and saved
# again, evaluates with its own loss and metrics (compile()) and holds the same optimizer state.
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
