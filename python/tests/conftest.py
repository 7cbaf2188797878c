# Shared data for the nnfleet module's tests: small blob images, the CLI binary, a plan.
import os
import shutil
import subprocess

import numpy as np
import pytest

NNFLEET = os.environ.get("NNFLEET_BIN", shutil.which("nnfleet") or "nnfleet")


def blobs(n, seed=3):
    """[n,8,8,1] float32 images whose class (0..2) decides where a bright square sits."""
    r = np.random.default_rng(seed)
    y = r.integers(0, 3, size=n).astype(np.int32)
    x = (0.3 * r.random((n, 8, 8, 1))).astype(np.float32)
    for i, c in enumerate(y):
        x[i, 1:4, 1 + 2 * c:4 + 2 * c, 0] += 1.0
    return x, y


MODELS = [
    {"name": "mlp", "layers": [{"Flatten": {}}, {"Dense": {"units": 8, "activation": "relu"}},
                               {"Dense": {"units": 3, "activation": "softmax"}}]},
    {"name": "cnn", "layers": [{"Conv2D": {"filters": 4, "kernel_size": 3, "activation": "relu"}},
                               {"Flatten": {}}, {"Dense": {"units": 3, "activation": "softmax"}}]},
]
FIT = dict(epochs=3, batch_size=16, loss="sparse_categorical_crossentropy",
           metrics=["accuracy"], optimizer={"Adam": {"learning_rate": 0.01}})


@pytest.fixture(scope="session")
def data():
    return blobs(96)


def cli(*args, check=True):
    return subprocess.run([NNFLEET, *map(str, args)], check=check, capture_output=True, text=True)
