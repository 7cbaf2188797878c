"""nnfleet: train many small Keras-style models at once on every core, from Python.

The engine is nnfleet's C++ library (one pinned worker per core, single-threaded kernels, the
data shared read-only by every worker); this package calls it with NumPy arrays read in place.

    import numpy as np, nnfleet
    run = nnfleet.train([{"name": "mlp", "layers": [{"Flatten": {}},
                                                    {"Dense": {"units": 10, "activation": "softmax"}}]}],
                        x, y, epochs=2, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    print(run["mlp"].history["loss"])

nnfleet.search(space_or_build, x, y, trials=..., max_epochs=...) searches hyperparameters the
same way: its trials train at once, a scheduler stopping the worse ones early.

Every engine error is raised as a subclass of nnfleet.Error with the message `nnfleet` prints
(its options named as this package's keywords: out=, resume=True). A bad argument is a
UsageError or DataError naming the keyword, the rule and what was expected, never a bare
TypeError or ValueError.

The engine reads the arrays in place while `train`, `predict` and `evaluate` run, without the
GIL: they must not change until the call returns. A model whose ids or labels go out of range
because an array changed during `train` ends as "failed" with a message saying so.
"""

from __future__ import annotations

import atexit
import threading

from . import _core
from ._core import DataError, Error, FileError, ModelError, PlanError, UsageError

__all__ = [
    "Error", "PlanError", "DataError", "ModelError", "FileError", "UsageError",
    "Model", "ModelResult", "Run", "train", "train_plan", "predict", "evaluate", "load_model",
    "stop", "datasets", "search", "Trial", "SearchRun", "STOP_MODEL",
]
__version__ = _core.__version__  # project(VERSION) in CMakeLists.txt, through nnfleet/version.h




def stop() -> None:
    """Stops every `train` running in this process, on any thread, as Ctrl-C stops its own:
    each model finishes its batch and checkpoints, and each `train` returns a Run with
    `interrupted` set (resume=True with the same `out` continues it).

    Ctrl-C raises KeyboardInterrupt on the main thread only; a program that trains on other
    threads and catches it calls stop() (if it lets the interrupt end the program, the exit
    stops them: see below).
    """
    _core.stop()


# At the interpreter's exit (the main thread ends, or an uncaught Ctrl-C ends it), trains still
# running on other threads are stopped as by stop(), before threading joins its threads; then
# (atexit) the exit waits until no thread is inside the engine, so that daemon threads are never
# ended by the interpreter's finalization in the middle of a call.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_core.shutdown, False)
atexit.register(_core.shutdown, True)

from ._datasets import datasets  # noqa: E402
from ._model import Model, evaluate, load_model, predict  # noqa: E402
from ._results import ModelResult, Run, SearchRun  # noqa: E402
from ._search import Trial, search  # noqa: E402
from ._train import STOP_MODEL, train, train_plan  # noqa: E402
