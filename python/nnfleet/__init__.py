"""nnfleet: train many small Keras-style models at once on every core, from Python.

The engine is nnfleet's C++ library (one pinned worker per core, single-threaded kernels, the
data shared read-only by every worker); this package calls it with NumPy arrays read in place.

    import numpy as np, nnfleet
    run = nnfleet.train([{"name": "mlp", "layers": [{"Flatten": {}},
                                                    {"Dense": {"units": 10, "activation": "softmax"}}]}],
                        x, y, epochs=2, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    print(run["mlp"].history["loss"])

Every engine error is raised as a subclass of nnfleet.Error with the message `nnfleet` prints.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import warnings

import numpy as np

from . import _core
from ._core import DataError, Error, FileError, ModelError, PlanError, UsageError

__all__ = [
    "Error", "PlanError", "DataError", "ModelError", "FileError", "UsageError",
    "Model", "ModelResult", "Run", "train", "train_plan", "predict", "evaluate", "load_model",
    "datasets",
]
__version__ = "0.1.0"

# NumPy dtypes the engine reads in place; every other dtype is converted once (with a warning).
_IN_PLACE = (np.uint8, np.int32, np.int64, np.float32, np.float64)


def _array(a, what):
    """`a` as an array the engine reads in place, converted once (with a warning) if needed."""
    if (isinstance(a, np.ndarray) and a.dtype.type in _IN_PLACE and a.dtype.isnative
            and a.flags.c_contiguous):
        return a
    arr = np.asarray(a)
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
    shapes = []
    if input_shape is not None:
        shapes = [list(s) for s in input_shape] if isinstance(input_shape[0], (list, tuple)) \
            else [list(input_shape)]
    return Model(_core.Model.load(os.fspath(path), os.fspath(weights) if weights else "", shapes))


def _as_model(model, x_shapes=None):
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    raise UsageError(f"failed to use the model: expected an nnfleet.Model or a path to a Keras "
                     f"file, got {type(model).__name__}")


def _list(v, what):
    if isinstance(v, dict):
        raise UsageError(f"failed to read {what}: pass several inputs or outputs as a list in "
                         "the model's order; expected a list of arrays, got a dict")
    if isinstance(v, (list, tuple)):
        return [_array(a, f"{what}[{i}]") for i, a in enumerate(v)]
    return [_array(v, what)]


def predict(model, x, *, y=None, loss=None, batch_size=256, workers=None, scale=None):
    """Predictions of `model` (a Model or a Keras file path) for the rows of `x`, on every core.

    Returns (predictions, per_sample_loss): float32 arrays of shape (N, *output) and (N,) (lists
    of them for several outputs); per_sample_loss is None without `y`. `loss` defaults to the
    file's compile loss. Results do not depend on `workers` (default: every core).
    Raises DataError (shapes, labels), UsageError (no loss known), ModelError.
    """
    m = _as_model(model)
    xs = _list(x, "x")
    ys = [] if y is None else _list(y, "y")
    preds, losses = m._m.predict(xs, ys, loss or "", int(batch_size), int(workers or 0),
                                 1.0 if scale is None else float(scale))
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
    if isinstance(metrics, str):
        metrics = [metrics]
    return dict(m._m.evaluate(_list(x, "x"), _list(y, "y"), loss or "", list(metrics or []),
                              int(batch_size), int(workers or 0),
                              1.0 if scale is None else float(scale)))


class ModelResult:
    """One model's outcome: name, status ("done", "diverged", "failed", "cancelled"), message,
    metrics (final values), history (Keras History.history: {"loss": [...], ...}), best
    ({"epoch", "monitor", "value"} or None), epochs, params, seconds, model (a Model or None).
    """

    def __init__(self, d):
        self.name = d["name"]
        self.status = d["status"]
        self.message = d["message"]
        self.metrics = dict(d["metrics"])
        self.best = d["best"]
        self.epochs = d["epochs"]
        self.params = d["params"]
        self.seconds = d["seconds"]
        self.model_file = d["model_file"] or None
        self.model = Model(d["model"]) if d["model"] is not None else None
        hist = {}
        for _, logs in d["history"]:
            for k, v in logs.items():
                hist.setdefault(k, []).append(v)
        self.history = hist
        self.epoch = [e for e, _ in d["history"]]

    def __repr__(self):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in list(self.metrics.items())[:4])
        return f"<ModelResult {self.name} {self.status} {shown}>"


class Run:
    """The results of `train`: iterate for ModelResults in plan order, or index by name.

    `out` is the output folder ("" when none was kept), `interrupted` whether the run was
    stopped, `exit_code` what `nnfleet train` would have exited with.
    """

    def __init__(self, r):
        self.results = [ModelResult(d) for d in r.models]
        self.out = r.out
        self.interrupted = r.interrupted
        self.write_error = r.write_error
        self.makespan = r.makespan
        self.workers = r.workers
        self.exit_code = r.exit_code

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
        return "quiet", False
    if progress == "json":
        return "json", False
    try:
        tty = sys.stdout.isatty() and sys.stdout is sys.__stdout__
    except (AttributeError, ValueError):
        tty = False
    # A terminal gets the CLI's live display; Jupyter and logs one printed line per epoch.
    return ("live", False) if tty else ("quiet", True)


def _print_epoch(name, epoch, logs, epochs):
    total = epochs.get(name)
    shown = " ".join(f"{k} {v:.4f}" for k, v in logs.items())
    print(f"{name} epoch {epoch}{'/' + str(total) if total else ''}: {shown}", flush=True)


def _run(path, text, base_dir, arrays, *, workers, out, resume, checkpoint_seconds, format,
         progress, on_epoch_end, epochs_of):
    mode, lines = _progress_mode(progress)
    callback = None
    if on_epoch_end is not None or lines:
        def callback(name, epoch, logs, seconds):
            if lines:
                _print_epoch(name, epoch, logs, epochs_of)
            if on_epoch_end is not None:
                on_epoch_end(name, epoch, dict(logs))
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise UsageError(f"failed to start the run: workers must be a positive integer; "
                         f"expected 1 or more (None: every core), got {workers!r}")
    r = _core.train(path, text, base_dir, arrays, workers or 0,
                    None if out is None else os.fspath(out), bool(resume),
                    float(checkpoint_seconds), format, mode, callback)
    return Run(r)


def train_plan(path, *, workers=None, out="", resume=False, checkpoint_seconds=2.0,
               format="keras", progress=True, on_epoch_end=None) -> Run:
    """Runs a plan file as `nnfleet train PATH` does (out="": runs/<plan>-<timestamp>)."""
    return _run(os.fspath(path), "", "", {}, workers=workers, out=out, resume=resume,
                checkpoint_seconds=checkpoint_seconds, format=format, progress=progress,
                on_epoch_end=on_epoch_end, epochs_of={})


_KERAS_SUFFIXES = (".keras", ".h5", ".hdf5", ".json")


def _model_entry(m, i, tmp):
    """A plan entry for one of train's `models`."""
    if isinstance(m, dict) and ("layers" in m or "keras" in m):
        entry = dict(m)
        entry.setdefault("name", f"model-{i}")
        return entry
    name = f"model-{i}"
    if isinstance(m, (str, os.PathLike)) and not str(m).lstrip().startswith("{"):
        p = os.fspath(m)
        if not p.lower().endswith(_KERAS_SUFFIXES):
            raise UsageError(f"failed to use models[{i}] '{p}': expected a Keras file "
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
        except json.JSONDecodeError as e:
            raise UsageError(f"failed to read models[{i}]: not valid Keras JSON ({e}); expected "
                             "model.to_json()") from None
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


def _data(x, y, key, validation_split, test_data, scale, arrays):
    arrays[f"x{key}"] = _array(x, "x" if not key else f"x{key}")
    arrays[f"y{key}"] = _array(y, "y" if not key else f"y{key}")
    d = {"train": {"x": f"memory:x{key}", "y": f"memory:y{key}"}}
    if validation_split:
        d["validation_split"] = float(validation_split)
    if scale is not None:
        d["scale"] = float(scale)
    if test_data is not None:
        tx, ty = test_data
        arrays[f"x_test{key}"] = _array(tx, "test x")
        arrays[f"y_test{key}"] = _array(ty, "test y")
        d["test"] = {"x": f"memory:x_test{key}", "y": f"memory:y_test{key}"}
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
    logs) is called on this thread. Ctrl-C stops every model cleanly (checkpointed in `out`),
    then raises KeyboardInterrupt. Results are bit-identical to `nnfleet train` on the same plan.
    Raises PlanError (every problem listed), DataError, ModelError, FileError, UsageError.
    """
    if validation_data is not None:
        raise UsageError("failed to use validation_data: nnfleet validates on the last fraction "
                         "of the training data; expected validation_split (or concatenate the "
                         "arrays and give the fraction)")
    if not isinstance(models, (list, tuple)):
        models = [models]
    if not models:
        raise UsageError("failed to train: expected at least one model, got an empty list")
    defaults = {}
    for k, v in (("epochs", epochs), ("batch_size", batch_size), ("loss", loss),
                 ("optimizer", optimizer), ("metrics", metrics),
                 ("early_stopping", early_stopping)):
        if v is not None:
            defaults[k] = v
    for k, v in plan_defaults.items():
        if k not in _FIT_KEYS:
            raise UsageError(f"failed to train: unknown keyword '{k}'; expected one of "
                             f"{', '.join(sorted(_FIT_KEYS | {'validation_split', 'test_data', 'seed', 'workers', 'out', 'resume', 'progress', 'on_epoch_end', 'checkpoint_seconds', 'format', 'scale'}))}")
        defaults[k] = v
    arrays = {}
    with tempfile.TemporaryDirectory(prefix="nnfleet-models-") as tmp:
        entries = [_model_entry(m, i, tmp) for i, m in enumerate(models)]
        per_model = isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))
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
                    progress=progress, on_epoch_end=on_epoch_end, epochs_of=epochs_of)


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
