# Keras's adapt() from Python: a Normalization without mean and variance in a model given to
# nnfleet.train learns them from the training rows (not the validation split), as the engine
# does for plans; the saved model holds them as Keras stores them.
import io
import zipfile

import h5py
import numpy as np
import pytest

import nnfleet


def _data(n=48, seed=4):
    r = np.random.default_rng(seed)
    x = np.stack([1000 + 250 * r.standard_normal(n), -3 + 0.01 * r.standard_normal(n),
                  r.integers(0, 5, n)], axis=1).astype(np.float32)
    y = r.integers(0, 3, n).astype(np.int32)
    return x, y


def _normalization_vars(path):
    with zipfile.ZipFile(path) as z:
        f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
        v = f["layers/normalization/vars"]
        return v["0"][()], v["1"][()], v["2"][()], v["2"].dtype


@pytest.mark.parametrize("workers", [1, 2])
def test_normalization_adapts_to_the_training_rows(tmp_path, workers):
    x, y = _data()
    model = {"name": "norm", "layers": [{"Normalization": {}},
                                        {"Dense": {"units": 3, "activation": "softmax"}}]}
    run = nnfleet.train([model], x, y, validation_split=0.25, epochs=1, batch_size=8,
                        loss="sparse_categorical_crossentropy", workers=workers, progress=False)
    assert run["norm"].status == "done"
    run["norm"].model.save(tmp_path / "norm.keras")
    mean, var, count, dtype = _normalization_vars(tmp_path / "norm.keras")
    train = x[:36].astype(np.float64)  # Keras's validation_split takes the last quarter
    np.testing.assert_allclose(mean, train.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(var, train.var(axis=0), rtol=1e-5)
    assert count == 36 and dtype == np.int64


def test_normalization_after_another_layer_is_refused_by_name():
    x, y = _data()
    model = {"name": "late", "layers": [{"Dense": {"units": 3}}, {"Normalization": {}},
                                        {"Dense": {"units": 3, "activation": "softmax"}}]}
    with pytest.raises(nnfleet.PlanError, match="'normalization' \\(Normalization\\) has no mean "
                                                "and variance"):
        nnfleet.train([model], x, y, epochs=1, loss="sparse_categorical_crossentropy",
                      progress=False)
