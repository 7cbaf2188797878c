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
import contextlib
import gzip
import json
import math
import os
import re
import reprlib
import sys
import tempfile
import threading
import warnings

import numpy as np

from . import _core
from ._core import DataError, Error, FileError, ModelError, PlanError, UsageError

__all__ = [
    "Error", "PlanError", "DataError", "ModelError", "FileError", "UsageError",
    "Model", "ModelResult", "Run", "train", "train_plan", "predict", "evaluate", "load_model",
    "stop", "datasets", "search", "Trial", "SearchRun", "STOP_MODEL",
]
__version__ = _core.__version__  # project(VERSION) in CMakeLists.txt, through nnfleet/version.h

# What on_epoch_end returns to stop that model after this epoch (as early stopping does).
STOP_MODEL = "stop"


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


# ---- arguments: each bad one a UsageError or DataError naming the keyword, never a raw error.

_INT32_MAX = 2**31 - 1
_FLOAT32_MAX = 3.4028234663852886e38
_MAX_DEPTH = 100  # nesting of plan values (the plan reader allows 128 with its own levels)
_MAX_PATH = 4096
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 40
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4
_repr.maxlevel = 3
_repr.maxlong = 24


def _show(v):
    """`v` as a message quotes it: its type and a short form, never a whole plan or array."""
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    try:
        text = _repr.repr(v)
    except Exception:  # a repr that raises says nothing more
        text = "..."
    return f"{type(v).__name__} {text[:80]}"


def _fail(call, name, rule, expected, got, cls=None):
    raise (cls or UsageError)(f"failed to {call}: {name} {rule}; expected {expected}, "
                              f"got {_show(got)}")


def _int(v, name, call, lo=1, hi=_INT32_MAX):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        _fail(call, name, "must be an integer", f"an int from {lo} to {hi}", v)
    if not lo <= int(v) <= hi:
        _fail(call, name, "is out of range", f"an int from {lo} to {hi}", v)
    return int(v)


def _int_from(v, name, call, lo, why="", hi=_INT32_MAX):
    """_int, with a value below `lo` refused by the rule "must be at least lo" (and `why`)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v < lo:
        _fail(call, name, f"must be at least {lo}{why}", f"an int from {lo} to {hi}", v)
    return _int(v, name, call, lo=lo, hi=hi)


def _float(v, name, call, lo=-_FLOAT32_MAX, hi=_FLOAT32_MAX, hi_open=False):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        _fail(call, name, "must be a number", f"a finite number from {lo:g} to {hi:g}", v)
    f = float(v) if not isinstance(v, int) or abs(v) < 2**1000 else math.inf
    if not (math.isfinite(f) and lo <= f and (f < hi if hi_open else f <= hi)):
        _fail(call, name, "is out of range",
              f"a finite number from {lo:g} to {hi:g}{' (excluded)' if hi_open else ''}", v)
    return f


def _text(v, name, call, choices=None, max_len=1000):
    if not isinstance(v, str):
        _fail(call, name, "must be a string", " or ".join(choices) if choices else "a str", v)
    if choices and v not in choices:
        _fail(call, name, "is not a known value", "one of " + ", ".join(choices), v)
    if len(v) > max_len or "\0" in v:
        _fail(call, name, f"must be at most {max_len} characters without NUL", "a short name", v)
    return v


def _path(v, name, call):
    if isinstance(v, os.PathLike):
        try:
            v = os.fspath(v)
        except Exception:
            v = None
    if not isinstance(v, str) or not v or "\0" in v or len(v) > _MAX_PATH:
        _fail(call, name, "must be a file or folder path",
              f"a non-empty str or os.PathLike of at most {_MAX_PATH} characters without NUL", v)
    return v


def _flag(v, name, call):
    if not isinstance(v, (bool, np.bool_)):
        _fail(call, name, "must be True or False", "a bool", v)
    return bool(v)


def _plain(v, where, call, depth=0, path=()):
    """`v` as plan JSON takes it: dicts with str keys, lists, str, finite numbers, bool, None;
    numpy scalars become Python ones. Cycles, depth and other types are refused by name."""
    if depth > _MAX_DEPTH:
        _fail(call, where, f"is nested more than {_MAX_DEPTH} levels deep",
              "a plan value of reasonable depth", "")
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            _fail(call, where, "holds a non-finite number", "finite numbers in plan values", v)
        return v
    if isinstance(v, (dict, list, tuple)):
        if any(v is p for p in path):
            _fail(call, where, "contains itself (a reference cycle)", "a tree of plan values", v)
        path = path + (v,)
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    _fail(call, where, "has a key that is not a string", "str keys", k)
                out[k] = _plain(x, f"{where}[{_repr.repr(k)}]", call, depth + 1, path)
            return out
        return [_plain(x, f"{where}[{i}]", call, depth + 1, path) for i, x in enumerate(v)]
    _fail(call, where, "is not a plan value", "numbers, strings, lists and dicts", v)


# Engine messages name the CLI's options; Python callers use keywords.
_CLI_WORDS = [
    (re.compile(r" \(nnfleet train: --out FOLDER\)"), ""),
    (re.compile(r"--resume\b"), "resume=True"),
    (re.compile(r"--out FOLDER\b"), "out=FOLDER"),
    (re.compile(r"--out\b"), "out="),
    (re.compile(r"--workers\b"), "workers="),
    (re.compile(r"--format\b"), "format="),
]
_LONG_WORD = re.compile(r"[^\s']{200,}")


def _for_python(msg):
    for pattern, words in _CLI_WORDS:
        msg = pattern.sub(words, msg)
    # A value quoted whole (a long name or string) is abbreviated.
    return _LONG_WORD.sub(lambda m: f"{m.group(0)[:60]}...({len(m.group(0))} characters)", msg)


@contextlib.contextmanager
def _engine():
    """Engine errors as Python callers read them (_for_python)."""
    try:
        yield
    except Error as e:
        msg = _for_python(str(e))
        if msg == str(e):
            raise
        raise type(e)(msg) from None

# NumPy dtypes the engine reads in place; every other dtype is converted once (with a warning).
_IN_PLACE = (np.uint8, np.int32, np.int64, np.float32, np.float64)


def _array(a, what):
    """`a` as an array the engine reads in place, converted once (with a warning) if needed."""
    if (isinstance(a, np.ndarray) and a.dtype.type in _IN_PLACE and a.dtype.isnative
            and a.flags.c_contiguous):
        return a
    if a is None:
        raise DataError(f"failed to read {what}: it is None; expected a numeric array")
    try:
        arr = np.asarray(a)
    except Exception as e:  # ragged nested lists, objects NumPy cannot read
        raise DataError(f"failed to read {what}: NumPy cannot make an array of it "
                        f"({str(e)[:100]}); expected a numeric array, got {_show(a)}") from None
    if arr.ndim == 0 or arr.size == 0:
        raise DataError(f"failed to read {what}: it holds no samples; expected an array with a "
                        f"first (sample) axis and at least one value, got {_show(arr)}")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.max() > np.iinfo(np.int64).max:
        i = int(np.argmax(arr.reshape(-1) > np.iinfo(np.int64).max))
        raise DataError(f"failed to read {what}: value {arr.reshape(-1)[i]} at flat index {i} "
                        f"does not fit int64; expected uint64 values up to 2^63-1")
    if arr.dtype.type in _IN_PLACE:
        target = arr.dtype.newbyteorder("=")
    elif arr.dtype.kind in "biu":
        target = np.int64 if arr.dtype.kind != "b" else np.uint8
    elif arr.dtype.kind == "f":
        target = np.float32
    else:
        raise DataError(f"failed to read {what}: unsupported dtype '{arr.dtype}'; expected a "
                        "numeric array (uint8, int32, int64, float32 or float64)")
    out = np.ascontiguousarray(arr, dtype=target)
    if out is not a:
        reason = [] if arr.flags.c_contiguous else ["a layout that is not C-contiguous"]
        if arr.dtype != out.dtype:
            reason.insert(0, f"dtype {arr.dtype}")
        if not isinstance(a, np.ndarray):
            reason = [f"a {type(a).__name__}"]
        warnings.warn(f"nnfleet: {what} has {' and '.join(reason)}; converted once to a "
                      f"C-contiguous {out.dtype} copy ({out.nbytes / 1e6:.1f} MB)", stacklevel=3)
    return out


class Model:
    """A Keras model: loaded from a .keras / .h5 / .json file, or trained by `train`.

    Immutable and safe to use from several threads. `input_shape` and `output_shape` are per
    sample, as Keras reports them with None for the batch axis.
    """

    def __init__(self, core):
        self._m = core

    @property
    def path(self) -> str:
        """The file this model was read from (a trained model: where its run saved it)."""
        return self._m.path

    @property
    def input_shape(self):
        """(None, *dims) of the only input, or a list of them for several inputs."""
        shapes = [(None,) + tuple(s) for _, s in self._m.inputs]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def output_shape(self):
        """(None, *dims) of the only output, or a list of them for several outputs."""
        shapes = [(None,) + tuple(s) for _, s in self._m.outputs]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def input_names(self):
        return [n for n, _ in self._m.inputs]

    @property
    def output_names(self):
        return [n for n, _ in self._m.outputs]

    def count_params(self) -> int:
        """Trainable and non-trainable parameters."""
        return self._m.count_params()

    def summary(self, print_fn=None) -> str:
        """Prints (with `print_fn`, default print) and returns the table `nnfleet inspect` shows."""
        text = self._m.summary()
        (print_fn or print)(text.rstrip("\n"))
        return text

    def predict(self, x, *, y=None, loss=None, batch_size=256, workers=None, scale=None):
        """(predictions, per_sample_loss); see nnfleet.predict."""
        return predict(self, x, y=y, loss=loss, batch_size=batch_size, workers=workers,
                       scale=scale)

    def evaluate(self, x, y, *, loss=None, metrics=None, batch_size=256, workers=None,
                 scale=None):
        """{"loss": ..., "<metric>": ...}; see nnfleet.evaluate."""
        return evaluate(self, x, y, loss=loss, metrics=metrics, batch_size=batch_size,
                        workers=workers, scale=scale)

    def save(self, path) -> None:
        """Writes the model with its weights as Keras 3 `.keras` or legacy `.h5` (by extension)."""
        self._m.save(os.fspath(path))

    def __repr__(self):
        return f"<nnfleet.Model {self.path!r} inputs={self.input_shape} outputs={self.output_shape}>"


def load_model(path, weights=None, *, input_shape=None) -> Model:
    """Reads a Keras model file (.keras, .h5, or a to_json() .json with `weights`).

    `input_shape` (per sample; a list of them for several inputs) fills dimensions the file
    leaves free (None). Raises FileError, ModelError.
    """
    call = "load the model"
    path = _path(path, "path", call)
    weights = "" if weights is None else _path(weights, "weights", call)
    shapes = []
    if input_shape is not None:
        expected = "a tuple of positive ints per sample, or a list of them (one per input)"
        if not isinstance(input_shape, (list, tuple)) or not input_shape:
            _fail(call, "input_shape", "must be a non-empty tuple", expected, input_shape)
        several = isinstance(input_shape[0], (list, tuple))
        for k, one in enumerate(input_shape if several else [input_shape]):
            name = f"input_shape[{k}]" if several else "input_shape"
            if not isinstance(one, (list, tuple)) or not one:
                _fail(call, name, "must be a non-empty tuple", expected, one)
            shapes.append([_int(d, f"{name}[{i}]", call) for i, d in enumerate(one)])
    with _engine():
        return Model(_core.Model.load(path, weights, shapes))


def _as_model(model, x_shapes=None):
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    raise UsageError(f"failed to use the model: model must be an nnfleet.Model or a Keras file; "
                     f"expected an nnfleet.Model or a path, got {_show(model)}")


def _list(v, what):
    if isinstance(v, dict):
        raise UsageError(f"failed to read {what}: pass several inputs or outputs as a list in "
                         "the model's order; expected a list of arrays, got a dict")
    if isinstance(v, (list, tuple)):
        if not v:
            raise DataError(f"failed to read {what}: it is an empty list; expected an array, "
                            "or a list of arrays (one per input or output)")
        return [_array(a, f"{what}[{i}]") for i, a in enumerate(v)]
    return [_array(v, what)]


def predict(model, x, *, y=None, loss=None, batch_size=256, workers=None, scale=None):
    """Predictions of `model` (a Model or a Keras file path) for the rows of `x`, on every core.

    Returns (predictions, per_sample_loss): float32 arrays of shape (N, *output) and (N,) (lists
    of them for several outputs); per_sample_loss is None without `y`. `loss` defaults to the
    file's compile loss. Results do not depend on `workers` (default: every core). The arrays
    are read in place without the GIL and must not change until predict returns.
    Raises DataError (shapes, labels), UsageError (no loss known), ModelError.
    """
    m = _as_model(model)
    call = "predict"
    args = _predict_args(call, loss, batch_size, workers, scale)
    xs = _list(x, "x")
    ys = [] if y is None else _list(y, "y")
    with _engine():
        preds, losses = m._m.predict(xs, ys, *args)
    if len(preds) == 1:
        return preds[0], None if losses is None else losses[0]
    return preds, losses


def evaluate(model, x, y, *, loss=None, metrics=None, batch_size=256, workers=None, scale=None):
    """Keras's model.evaluate: {"loss": ..., "<metric>": ...} of `model` on (x, y), every core.

    `loss` and `metrics` (names, as Keras's compile takes them) default to the model file's own
    compile loss and metrics. With several outputs "loss" is the loss_weights-weighted sum and
    each output adds "<output>_loss" and "<output>_<metric>". The same figures as
    `nnfleet evaluate`, for any `workers`. Raises DataError, UsageError, ModelError.
    """
    m = _as_model(model)
    call = "evaluate"
    loss, batch_size, workers, scale = _predict_args(call, loss, batch_size, workers, scale)
    if isinstance(metrics, str):
        metrics = [metrics]
    if metrics is not None and not isinstance(metrics, (list, tuple)):
        _fail(call, "metrics", "must be a list of metric names", "a list of str", metrics)
    metrics = [_text(v, f"metrics[{i}]", call) for i, v in enumerate(metrics or [])]
    xs, ys = _list(x, "x"), _list(y, "y")
    with _engine():
        return dict(m._m.evaluate(xs, ys, loss, metrics, batch_size, workers, scale))


def _predict_args(call, loss, batch_size, workers, scale):
    """predict's and evaluate's loss, batch_size, workers and scale, checked."""
    return ("" if loss is None else _text(loss, "loss", call),
            _int(batch_size, "batch_size", call),
            0 if workers is None else _int(workers, "workers", call),
            1.0 if scale is None else _float(scale, "scale", call))


class ModelResult:
    """One model's outcome: name, status ("done", "diverged", "failed", "cancelled", or
    "pruned": a search's scheduler stopped it), message, metrics (final values), history (Keras
    History.history: {"loss": [...], ...}), best ({"epoch", "monitor", "value"} or None), epochs,
    params, seconds, model (a Model or None), parameters ({name: value}: its grid's vars, its
    search trial's values, its plan entry's `parameters:`), rungs (a search trial's
    [(epochs, value, decision), ...]; decision "promoted", "pruned", "final" or "stopped").
    """

    def __init__(self, r):
        # r: the engine's result (_core.ModelResult, nnfleet/results.h), read once.
        self.name = r.name
        self.status = _core.status_name(r.status)
        self.message = r.message
        self.metrics = dict(r.metrics)
        best = r.best
        self.best = ({"epoch": best.epoch, "monitor": best.monitor, "value": best.value}
                     if best.epoch else None)
        self.epochs = r.epochs
        self.params = r.params
        self.seconds = r.seconds
        self.model_file = r.model_file or None
        # {name: value}: a grid's vars, a search trial's drawn values, an entry's `parameters:`.
        self.parameters = {k: json.loads(v) for k, v in r.parameters}
        self.rungs = [(g.epochs, g.value, g.decision) for g in r.rungs]  # a search trial's
        model = r.model
        self._model = Model(model) if model is not None else None
        hist = {}
        epochs = []
        for e in r.history:
            epochs.append(e.epoch)
            for k, v in e.values:
                hist.setdefault(k, []).append(v)
        self.history = hist
        self.epoch = epochs

    @property
    def model(self):
        """The trained Model, read from model_file when first asked for (None: no model file,
        as for a pruned, failed or diverged model). Reading a model back takes about 3 ms for a
        tiny one: 6 s of a 2,000-model run whose models nobody looked at, when train read them
        all (the models of a run with out=None are read before its folder goes)."""
        if self._model is None and self.model_file is not None:
            self._model = load_model(self.model_file)
        return self._model

    def __repr__(self):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in list(self.metrics.items())[:4])
        return f"<ModelResult {self.name} {self.status} {shown}>"


def _exit_code(run):
    """What `nnfleet train` exits with for this run (the command line's rule, cli/leaderboard.h)."""
    if run.write_error:
        return 1
    if run.interrupted:
        return 130
    statuses = [m.status for m in run.results]
    if "failed" in statuses or (statuses and "done" not in statuses):
        return 3
    return 0


class Run:
    """The results of `train`: iterate for ModelResults in plan order, or index by name.

    `out` is the output folder ("" when none was kept), `interrupted` whether the run was
    stopped, `exit_code` what `nnfleet train` would have exited with.
    """

    def __init__(self, r):
        self.results = [ModelResult(m) for m in r.models]
        self.out = r.out_dir
        self.interrupted = r.interrupted
        self.write_error = r.write_error
        self.makespan = r.makespan
        self.workers = r.workers
        self.exit_code = _exit_code(self)

    def __iter__(self):
        return iter(self.results)

    def __len__(self):
        return len(self.results)

    def __getitem__(self, key):
        if isinstance(key, int):
            return self.results[key]
        for r in self.results:
            if r.name == key:
                return r
        raise KeyError(key)

    def keys(self):
        return [r.name for r in self.results]

    def __repr__(self):
        return f"<nnfleet.Run {len(self)} model(s), out={self.out!r}>"


def _progress_mode(progress):
    if not progress:
        return _core.Progress.QUIET, False
    if progress == "json":
        return _core.Progress.JSON, False
    try:
        tty = sys.stdout.isatty() and sys.stdout is sys.__stdout__
    except (AttributeError, ValueError):
        tty = False
    # A terminal gets the CLI's live display; Jupyter and logs one printed line per epoch.
    return (_core.Progress.LIVE, False) if tty else (_core.Progress.QUIET, True)


def _print_epoch(name, epoch, logs, epochs):
    total = epochs if isinstance(epochs, int) else epochs.get(name)
    shown = " ".join(f"{k} {v:.4f}" for k, v in logs.items())
    print(f"{name} epoch {epoch}{'/' + str(total) if total else ''}: {shown}", flush=True)


def _run(path, text, base_dir, arrays, *, workers, out, resume, checkpoint_seconds, format,
         progress, on_epoch_end, epochs_of, hold=False, result=None):
    call = "train"
    if workers is not None:
        if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, (int, np.integer)):
            _fail(call, "workers", "must be an integer", "1 or more (None: every core)", workers)
        workers = _int(workers, "workers", call)
    if out is not None and not (isinstance(out, str) and out == ""):
        out = _path(out, "out", call)
    resume = _flag(resume, "resume", call)
    checkpoint_seconds = _float(checkpoint_seconds, "checkpoint_seconds", call, lo=0.0)
    format = _text(format, "format", call, choices=("keras", "h5", "onnx"))
    if not (progress is None or isinstance(progress, (bool, np.bool_))
            or (isinstance(progress, str) and progress == "json")):
        _fail(call, "progress", "must be True, False or 'json'", "a bool or 'json'", progress)
    if on_epoch_end is not None and not callable(on_epoch_end):
        _fail(call, "on_epoch_end", "must be callable", "a function(name, epoch, logs) or None",
              on_epoch_end)
    mode, lines = _progress_mode(progress)
    callback = None
    if on_epoch_end is not None or lines:
        def callback(name, epoch, logs, seconds):
            if lines:
                _print_epoch(name, epoch, logs, epochs_of)
            if on_epoch_end is not None:
                answer = on_epoch_end(name, epoch, dict(logs))
                return isinstance(answer, str) and answer == STOP_MODEL
            return False
    # With on_epoch_end, each model's worker waits at its epoch ends for the callback's answer,
    # so that STOP_MODEL stops that model after this very epoch (not at a later one by timing).
    with _engine():
        r = _core.train(path, text, base_dir, arrays, workers or 0, out, resume,
                        checkpoint_seconds, format, mode, callback,
                        hold or on_epoch_end is not None)
    return (result or Run)(r)


def train_plan(path, *, workers=None, out="", resume=False, checkpoint_seconds=2.0,
               format="keras", progress=True, on_epoch_end=None) -> Run:
    """Runs a plan file as `nnfleet train PATH` does (out="": runs/<plan>-<timestamp>)."""
    return _run(_path(path, "path", "train"), "", "", {}, workers=workers, out=out, resume=resume,
                checkpoint_seconds=checkpoint_seconds, format=format, progress=progress,
                on_epoch_end=on_epoch_end, epochs_of={})


_KERAS_SUFFIXES = (".keras", ".h5", ".hdf5", ".json")


def _model_entry(m, i, tmp):
    """A plan entry for one of train's `models`."""
    if isinstance(m, dict):
        m = _plain(m, f"models[{i}]", "train")
    if isinstance(m, dict) and ("layers" in m or "keras" in m):
        entry = dict(m)
        entry.setdefault("name", f"model-{i}")
        return entry
    name = f"model-{i}"
    if isinstance(m, (str, os.PathLike)) and not str(m).lstrip().startswith("{"):
        p = os.fspath(m)
        if not p.lower().endswith(_KERAS_SUFFIXES):
            raise UsageError(f"failed to use models[{i}] {_repr.repr(p)}: expected a Keras file "
                             "(.keras, .h5, .json), a to_json() string, a plan-style dict or a "
                             "Keras model")
        stem = os.path.splitext(os.path.basename(p))[0]
        return {"name": stem or name, "keras": os.path.abspath(p)}
    if hasattr(m, "to_json") and hasattr(m, "get_weights") and hasattr(m, "save"):
        # A Keras model with its weights: saved as a .keras file, whose weights are the initial
        # ones (as a `keras:` plan entry's are).
        file = os.path.join(tmp, f"model-{i}.keras")
        m.save(file)
        return {"name": getattr(m, "name", None) or name, "keras": file}
    if hasattr(m, "to_json"):
        name = getattr(m, "name", name) or name
        m = m.to_json()
    if isinstance(m, str):
        try:
            m = json.loads(m)
        except (json.JSONDecodeError, RecursionError) as e:
            raise UsageError(f"failed to read models[{i}]: not valid Keras JSON "
                             f"({str(e)[:100]}); expected model.to_json()") from None
        m = _plain(m, f"models[{i}]", "train")
    if isinstance(m, dict) and "class_name" in m:
        file = os.path.join(tmp, f"model-{i}.json")
        with open(file, "w") as f:
            json.dump(m, f)
        cfg_name = m.get("config", {}).get("name") if isinstance(m.get("config"), dict) else None
        return {"name": cfg_name or name, "keras": file}
    raise UsageError(f"failed to use models[{i}]: expected a plan-style dict with 'layers', a "
                     f"Keras to_json() string or dict, a .keras/.h5 path or a Keras model, got "
                     f"{type(m).__name__}")


_FIT_KEYS = {"epochs", "batch_size", "loss", "optimizer", "metrics", "early_stopping", "shuffle",
             "batch_split"}
_RUN_KEYS = {"validation_split", "test_data", "seed", "workers", "out", "resume", "progress",
             "on_epoch_end", "checkpoint_seconds", "format", "scale"}


def _fit_args(call, validation_split, validation_data, scale, seed):
    """train's and search's validation_split, scale and seed, checked."""
    if validation_split is not None:
        validation_split = _float(validation_split, "validation_split", call, lo=0.0, hi=1.0,
                                  hi_open=True)
    if scale is not None:
        scale = _float(scale, "scale", call)
    seed = _int(seed, "seed", call, lo=0, hi=2**63 - 1)
    if validation_data is not None:
        raise UsageError("failed to use validation_data: nnfleet validates on the last fraction "
                         "of the training data; expected validation_split (or concatenate the "
                         "arrays and give the fraction)")
    return validation_split, scale, seed


def _fit_defaults(call, given, plan_defaults, known):
    """The plan's `defaults:` from the fit keywords `given` (pairs; None: not given) and the
    other plan defaults (unknown keywords refused, naming the `known` ones)."""
    defaults = {k: _plain(v, k, call) for k, v in given if v is not None}
    for k, v in plan_defaults.items():
        if k not in _FIT_KEYS:
            raise UsageError(f"failed to {call}: unknown keyword {_repr.repr(k)}; expected one "
                             f"of {', '.join(sorted(known))}")
        defaults[k] = _plain(v, k, call)
    return defaults


def _data(x, y, key, validation_split, test_data, scale, arrays, call="train"):
    arrays[f"x{key}"] = _array(x, "x" if not key else f"x{key}")
    arrays[f"y{key}"] = _array(y, "y" if not key else f"y{key}")
    d = {"train": {"x": {"array": f"x{key}"}, "y": {"array": f"y{key}"}}}
    if validation_split:
        d["validation_split"] = validation_split
    if scale is not None:
        d["scale"] = scale
    if test_data is not None:
        name = "test_data" if not key else f"test_data[{key[1:]}]"
        if not isinstance(test_data, (list, tuple)) or len(test_data) != 2:
            _fail(call, name, "must be a pair", "(x_test, y_test)", test_data)
        tx, ty = test_data
        arrays[f"x_test{key}"] = _array(tx, f"{name}'s x")
        arrays[f"y_test{key}"] = _array(ty, f"{name}'s y")
        d["test"] = {"x": {"array": f"x_test{key}"}, "y": {"array": f"y_test{key}"}}
    return d


def train(models, x, y, *, validation_split=None, validation_data=None, test_data=None,
          epochs=None, batch_size=None, loss=None, optimizer=None, metrics=None,
          early_stopping=None, seed=0, workers=None, out=None, resume=False, progress=True,
          on_epoch_end=None, checkpoint_seconds=2.0, format="keras", scale=None,
          **plan_defaults) -> Run:
    """Trains every model at once, one pinned worker per core, and returns a Run.

    models: a list mixing plan-style dicts ({"name": ..., "layers": [{"Dense": {...}}, ...]}),
    Keras to_json() strings or dicts, .keras/.h5/.json paths and objects with to_json() (a Keras
    model with get_weights() and save() starts from its own weights).
    x, y: NumPy arrays shared by every model (read in place when C-contiguous uint8, int32,
    int64, float32 or float64; else converted once, with a warning), or lists of them, one
    pair per model. validation_split takes the last fraction of x (Keras); test_data=(x, y) is
    evaluated after training. Keyword defaults follow Keras's compile/fit; any other plan
    default (shuffle, batch_split, ...) may be given too. out: keep the output folder there
    (None: a temporary one); resume=True continues the run in `out`. on_epoch_end(name, epoch,
    logs) is called on this thread while that model's worker waits for it; returning
    nnfleet.STOP_MODEL ("stop") ends that model after this epoch, as early stopping would (status
    "done"). Ctrl-C stops every model cleanly (checkpointed in `out`),
    then raises KeyboardInterrupt; on another thread, nnfleet.stop() (or the interpreter's
    exit) stops it and it returns a Run with `interrupted` set. The arrays are read in place
    without the GIL: they must not change until train returns (a model whose labels or ids go
    out of range because one did ends as "failed", saying so). Results are bit-identical to
    `nnfleet train` on the same plan.
    Raises PlanError (every problem listed), DataError, ModelError, FileError, UsageError.
    """
    call = "train"
    validation_split, scale, seed = _fit_args(call, validation_split, validation_data, scale,
                                              seed)
    if not isinstance(models, (list, tuple)):
        models = [models]
    if not models:
        raise UsageError("failed to train: models must hold at least one model; expected a "
                         "list of models, got an empty list")
    # A test hook: each model's worker waits at each epoch end until on_epoch_end returned.
    hold = bool(plan_defaults.pop("_hold_at_epoch_end", False))
    defaults = _fit_defaults(call, (("epochs", epochs), ("batch_size", batch_size),
                                    ("loss", loss), ("optimizer", optimizer),
                                    ("metrics", metrics), ("early_stopping", early_stopping)),
                             plan_defaults, _FIT_KEYS | _RUN_KEYS)
    arrays = {}
    with tempfile.TemporaryDirectory(prefix="nnfleet-models-") as tmp:
        entries = [_model_entry(m, i, tmp) for i, m in enumerate(models)]
        per_model = isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))
        if per_model and test_data is not None and (
                not isinstance(test_data, (list, tuple)) or len(test_data) != len(entries)):
            _fail(call, "test_data", "must give each model its own pair when x and y are lists",
                  f"a list of {len(entries)} (x_test, y_test) pairs", test_data)
        plan = {"seed": seed, "defaults": defaults, "models": entries}
        if per_model:
            if len(x) != len(entries) or len(y) != len(entries):
                raise UsageError(f"failed to train: lists of arrays give each model its own data; "
                                 f"expected {len(entries)} x and y arrays, got {len(x)} and {len(y)}")
            for i, e in enumerate(entries):
                e["data"] = _data(x[i], y[i], f"_{i}", validation_split,
                                  None if test_data is None else test_data[i], scale, arrays)
        else:
            plan["data"] = _data(x, y, "", validation_split, test_data, scale, arrays)
        text = json.dumps(plan, indent=1, default=_json_default)
        epochs_of = {e["name"]: e.get("epochs", defaults.get("epochs", 1)) for e in entries}
        return _run("nnfleet.train", text, os.getcwd(), arrays, workers=workers, out=out,
                    resume=resume, checkpoint_seconds=checkpoint_seconds, format=format,
                    progress=progress, on_epoch_end=on_epoch_end, epochs_of=epochs_of,
                    hold=hold)


# ---- search: sampled spaces and schedulers (README "Search"), as plans with a `search:` section.

_SCHEDULERS = ("successive_halving", "median_stopping", "none")
_MAX_TRIALS = 100_000  # limits::kMaxPlanModels (src/core/limits.h): a plan's models at most

class Trial:
    """One trial of a `search` given a build function: build(trial) draws its parameters here
    and returns the model dict they make.

    Each draw is the value a plan's `search.space` gives the same parameter of the same trial
    (the C++ engine's sample_parameter: it depends only on the seed, the trial's index and the
    parameter's name, so adding a parameter leaves the others' values unchanged). Drawing the
    same name again in the same trial returns the same value; with another distribution it is
    a UsageError naming the parameter.

    number: the trial's index (0, 1, ...); params: {name: value} drawn so far, in order.
    Trial(number, seed, sampler) previews what search(build, seed=seed, sampler=sampler) draws
    for that trial (with "sobol", a parameter's dimension is the order in which the search's
    trials first drew it: the same only when drawn in the same order).
    """

    def __init__(self, number, seed=0, sampler="random", _dimensions=None):
        call = "make a trial"
        self.number = _int(number, "number", call, lo=0, hi=_MAX_TRIALS)
        self._seed = _int(seed, "seed", call, lo=0, hi=2**63 - 1)
        self._sampler = _text(sampler, "sampler", call, choices=("random", "sobol"))
        # name -> Sobol dimension, shared by a search's trials (in order of first draw)
        self._dims = {} if _dimensions is None else _dimensions
        self._params = {}
        self._dists = {}

    @property
    def params(self):
        return dict(self._params)

    def _draw(self, name, dist):
        call = f"draw a parameter of trial {self.number}"
        name = _text(name, "name", call)
        dist = _plain(dist, f"parameter {_repr.repr(name)}", call)
        text = json.dumps(dist, sort_keys=True)
        if name in self._dists:
            if self._dists[name] != text:
                raise UsageError(
                    f"failed to {call}: parameter {_repr.repr(name)} is drawn twice with different "
                    f"distributions; expected the same distribution as its first draw "
                    f"{self._dists[name][:200]}, got {text[:200]}")
            return self._params[name]
        dim = self._dims.setdefault(name, len(self._dims))  # order of first draw in the search
        with _engine():
            value = json.loads(_core.sample_parameter(self._seed, self.number, name, text,
                                                      self._sampler, dim))
        self._dists[name] = text
        self._params[name] = value
        return value

    def uniform(self, name, lo, hi):
        """A float drawn uniformly from [lo, hi)."""
        return self._draw(name, {"uniform": [lo, hi]})

    def loguniform(self, name, lo, hi):
        """A float drawn uniformly on a log scale from [lo, hi) (0 < lo < hi)."""
        return self._draw(name, {"loguniform": [lo, hi]})

    def int(self, name, lo, hi, step=1, log=False):
        """An int from lo to hi (both included), on multiples of `step` from lo, or on a log
        scale with log=True."""
        dist = {"int": [lo, hi]}
        if not (isinstance(step, int) and not isinstance(step, bool) and step == 1):
            dist["step"] = step
        if log is not False:
            dist["log"] = log
        return self._draw(name, dist)

    def choice(self, name, values):
        """One of `values` (a non-empty list of numbers, strings or bools)."""
        if isinstance(values, tuple):
            values = list(values)
        return self._draw(name, {"choice": values})

    def fixed(self, name, value):
        """`value` itself, recorded as a parameter of the trial."""
        return self._draw(name, {"fixed": value})

    def __repr__(self):
        return f"<nnfleet.Trial {self.number} {self._params}>"


class SearchRun(Run):
    """The results of `search`, a Run whose models are its trials in trial order: each
    ModelResult has `parameters` ({name: value}) and `rungs` ([(epochs, value, decision), ...],
    decision "promoted", "pruned", "final" or "stopped"), and status "pruned" when the scheduler
    stopped it at a rung (its figures are that rung's; no model).

    metric, higher_is_better: what the search compared. best: the finished ("done") trial with
    the best metric (the first of equal ones), or None. trials: one dict per trial (trial, name,
    status, epochs, metric, rungs and each parameter). trials_frame(): them as a pandas DataFrame.
    """

    def __init__(self, r):
        super().__init__(r)
        # What the engine ranked by: the search's metric and the direction its mode resolved to.
        self.metric = r.rank_by
        self.higher_is_better = r.rank_higher_is_better

    def _value(self, m):
        return m.metrics.get(self.metric)  # a pruned trial's: its last rung's (as trials.csv)

    @property
    def best(self):
        done = [(self._value(m), k) for k, m in enumerate(self.results)
                if m.status == "done" and self._value(m) is not None
                and not math.isnan(self._value(m))]
        if not done:
            return None
        sign = -1.0 if self.higher_is_better else 1.0
        return self.results[min(done, key=lambda vk: (sign * vk[0], vk[1]))[1]]

    @property
    def trials(self):
        rows = []
        for k, m in enumerate(self.results):
            row = {"trial": k, "name": m.name, "status": m.status, "epochs": m.epochs,
                   "metric": self._value(m), "rungs": list(m.rungs)}
            for name, v in m.parameters.items():
                row[name if name not in row else f"param:{name}"] = v
            rows.append(row)
        return rows

    def trials_frame(self):
        """The trials as a pandas DataFrame, as the run folder's trials.csv: trial, name,
        status, epochs, <metric>, rung_<epochs> per rung budget (the metric there, NaN where
        the trial did not reach it), then each parameter. Raises UsageError without pandas."""
        try:
            import pandas
        except ImportError:
            raise UsageError("failed to make the trials' DataFrame: pandas is not importable; "
                             "expected pandas installed (pip install pandas, or Debian's "
                             "python3-pandas), or use run.trials") from None
        budgets = sorted({e for m in self.results for e, _, _ in m.rungs})
        rows = []
        for row in self.trials:
            rungs = {e: v for e, v, _ in row.pop("rungs")}
            value = row.pop("metric")
            out = {k: row.pop(k) for k in ("trial", "name", "status", "epochs")}
            out[self.metric] = value
            for e in budgets:
                out[f"rung_{e}"] = rungs.get(e, math.nan)
            out.update(row)
            rows.append(out)
        return pandas.DataFrame(rows)

    def __repr__(self):
        return f"<nnfleet.SearchRun {len(self)} trial(s), metric={self.metric!r}, out={self.out!r}>"


def _schedule(call, scheduler, reduction_factor, min_epochs, max_epochs, brackets, interval):
    """search.scheduler of the plan, its numbers checked by keyword."""
    scheduler = _text(scheduler, "scheduler", call, choices=_SCHEDULERS)
    if max_epochs is None:
        _fail(call, "max_epochs", "is required", "the epochs of a trial that is never stopped "
              "(an int of at least 1)", max_epochs)
    max_epochs = _int_from(max_epochs, "max_epochs", call, 1)
    if scheduler == "none":
        return {"none": {"max_epochs": max_epochs}}
    min_epochs = _int(min_epochs, "min_epochs", call)
    max_epochs = _int_from(max_epochs, "max_epochs", call, min_epochs, " (min_epochs)")
    if scheduler == "median_stopping":
        return {"median_stopping": {"min_epochs": min_epochs, "max_epochs": max_epochs,
                                    "interval": _int(interval, "interval", call)}}
    factor = _int_from(reduction_factor, "reduction_factor", call, 2,
                       " (the best 1/reduction_factor of a rung train on)")
    return {"successive_halving": {"reduction_factor": factor, "min_epochs": min_epochs,
                                   "max_epochs": max_epochs,
                                   "brackets": _int(brackets, "brackets", call)}}


def _search_section(call, trials, schedule, metric, mode, sampler, max_total_epochs, time_limit):
    section = {"trials": trials, "sampler": sampler, "scheduler": schedule, "metric": metric,
               "mode": mode}
    if max_total_epochs is not None:
        section["max_total_epochs"] = _int(max_total_epochs, "max_total_epochs", call)
    if time_limit is not None:
        section["time_limit"] = _float(time_limit, "time_limit", call, lo=0.0)
        if section["time_limit"] <= 0:
            _fail(call, "time_limit", "must be positive", "seconds above 0 (None: no limit)",
                  time_limit)
    return section


def _templates(call, model):
    """The model templates of a space search (`model=`): a dict, or a list of them with "when"."""
    expected = "a plan-style model dict with 'layers' (strings may hold {param} placeholders), " \
               "or a list of them with 'when'"
    if model is None:
        _fail(call, "model", "is required with a space dict", expected, model)
    several = isinstance(model, (list, tuple))
    if several and not model:
        _fail(call, "model", "must hold at least one template", expected, model)
    entries = []
    for i, m in enumerate(model if several else [model]):
        where = f"model[{i}]" if several else "model"
        if not isinstance(m, dict):
            _fail(call, where, "must be a dict", expected, m)
        m = _plain(m, where, call)
        if "layers" not in m and "keras" not in m:
            _fail(call, where, "has no 'layers'", expected, m)
        m.setdefault("name", "trial-{trial}")
        entries.append(m)
    return entries


def _built(call, build, trials, seed, sampler):
    """The models build(trial) returns, one per trial in trial order, each recording the
    parameters its trial drew (`parameters:`) and named trial-<k> unless it names itself."""
    width = len(str(trials - 1))
    dims = {}
    entries = []
    for k in range(trials):
        trial = Trial(k, seed, sampler, _dimensions=dims)
        m = build(trial)
        where = f"build(trial {k})"
        if not isinstance(m, dict):
            _fail(call, where, "must return a model dict", "a plan-style dict with 'layers' "
                  "(the trial's model)", m)
        m = _plain(m, f"{where}'s model", call)
        if "layers" not in m and "keras" not in m:
            _fail(call, f"{where}'s model", "has no 'layers'",
                  "a plan-style dict with 'layers'", m)
        m.setdefault("name", f"trial-{k:0{width}d}")
        m["parameters"] = _plain(trial.params, f"{where}'s parameters", call)
        entries.append(m)
    return entries


def search(space_or_build, x, y, *, model=None, trials=None, scheduler="successive_halving",
           reduction_factor=3, min_epochs=1, max_epochs=None, brackets=1, interval=1,
           metric="val_loss", mode="auto", sampler="random", max_total_epochs=None,
           time_limit=None, validation_split=None, validation_data=None, test_data=None,
           batch_size=None, loss=None, optimizer=None, metrics=None, early_stopping=None,
           seed=0, workers=None, out=None, resume=False, progress=True, on_epoch_end=None,
           checkpoint_seconds=2.0, format="keras", scale=None, **plan_defaults) -> SearchRun:
    """Searches hyperparameters: `trials` models trained at once on every core, a scheduler
    stopping the worse ones early at its rungs. Returns a SearchRun.

    space_or_build: a space dict in the plan's `search.space` form ({"lr": {"loguniform":
    [1e-4, 1e-2]}, "depth": {"int": [1, 3]}, "act": {"choice": ["relu", "tanh"]}, ...; "when",
    "per" and "log" as in plans}) with model= a template dict (or a list of them, each with
    "when") whose strings use "{param}" placeholders ("trial-{trial}" names the trials); or a
    function build(trial) -> model dict, called once per trial in trial order before anything
    trains, that draws with trial.uniform / loguniform / int / choice / fixed (see Trial).
    Either way trial k's values are what a plan with the same seed draws for it.
    scheduler: "successive_halving" (rungs at min_epochs * reduction_factor^j up to
    max_epochs: the best 1/reduction_factor of each rung train on; brackets > 1: Hyperband),
    "median_stopping" (rungs every `interval` epochs from min_epochs: trials worse than the
    rung's median stop) or "none" (every trial trains max_epochs). metric/mode: what rungs
    compare (mode "auto": higher is better for accuracies, precision, recall, auc, r2_score).
    sampler: "random" or "sobol". max_total_epochs: fewer trials, so that the planned epochs fit;
    time_limit: seconds, ending the search at the next rung boundary (not deterministic).
    The other keywords are train's (epochs is max_epochs here). Without on_epoch_end the result
    depends only on the data, the models and the seed; on_epoch_end returning
    nnfleet.STOP_MODEL stops that trial after the epoch, the one way a callback changes it.
    Raises UsageError (a bad argument, by name), PlanError, DataError, ModelError, FileError.
    """
    call = "run the search"
    validation_split, scale, seed = _fit_args(call, validation_split, validation_data, scale,
                                              seed)
    if "epochs" in plan_defaults:
        _fail(call, "epochs", "is set by the scheduler in a search",
              "max_epochs= (and min_epochs=) instead", plan_defaults["epochs"])
    if trials is None:
        _fail(call, "trials", "is required", "the number of trials (an int of at least 1)", trials)
    trials = _int_from(trials, "trials", call, 1, hi=_MAX_TRIALS)
    schedule = _schedule(call, scheduler, reduction_factor, min_epochs, max_epochs, brackets,
                         interval)
    section = _search_section(call, trials, schedule, _text(metric, "metric", call),
                              _text(mode, "mode", call, choices=("min", "max", "auto")),
                              _text(sampler, "sampler", call, choices=("random", "sobol")),
                              max_total_epochs, time_limit)
    known = (_FIT_KEYS - {"epochs"}) | _RUN_KEYS | {"validation_data"}
    defaults = _fit_defaults(call, (("batch_size", batch_size), ("loss", loss),
                                    ("optimizer", optimizer), ("metrics", metrics),
                                    ("early_stopping", early_stopping)), plan_defaults, known)
    if isinstance(space_or_build, dict):
        section["space"] = _plain(space_or_build, "space", call)
        entries = _templates(call, model)
    elif callable(space_or_build):
        if model is not None:
            _fail(call, "model", "is for a space dict, not a build function",
                  "None (build(trial) returns each trial's model)", model)
        del section["trials"]  # the plan's models are the trials
        entries = _built(call, space_or_build, trials, seed, section["sampler"])
    else:
        _fail(call, "space_or_build", "must be a space dict or a build function",
              "a dict {name: distribution} with model=, or build(trial) -> model dict",
              space_or_build)
    arrays = {}
    plan = {"seed": seed, "defaults": defaults, "search": section, "models": entries,
            "data": _data(x, y, "", validation_split, test_data, scale, arrays, call)}
    text = json.dumps(plan, indent=1, default=_json_default)
    return _run("nnfleet.search", text, os.getcwd(), arrays, workers=workers, out=out,
                resume=resume, checkpoint_seconds=checkpoint_seconds, format=format,
                progress=progress, on_epoch_end=on_epoch_end,
                epochs_of=next(iter(schedule.values()))["max_epochs"],
                result=SearchRun)


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    raise UsageError(f"failed to write the plan: {type(v).__name__} is not a plan value; "
                     "expected numbers, strings, lists and dicts")


class datasets:  # noqa: N801 (a namespace, as keras.datasets)
    """Data sets nnfleet finds on this machine."""

    @staticmethod
    def fashion_mnist(split="train"):
        """(x, y) of Fashion-MNIST's "train" (60,000) or "test" (10,000) split, from the Debian
        package dataset-fashion-mnist (or $NNFLEET_FASHION_MNIST): x uint8 [n, 28, 28, 1], y
        uint8 [n], as `nnfleet train` reads them. Raises DataError when absent."""
        images, labels = _core.fashion_mnist_files(split)

        def read(path, offset):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)

        y = read(labels, 8)
        x = read(images, 16).reshape(len(y), 28, 28, 1)
        return x, y
