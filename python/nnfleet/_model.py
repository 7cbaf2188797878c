"""Model: a Keras model loaded or trained; predict and evaluate on every core."""

from __future__ import annotations

import os

from . import _core
from ._args import _engine, _fail, _float, _int, _path, _several, _show, _text
from ._core import UsageError


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
        """The predictions (as Keras's predict); with y=, (predictions, per_sample_loss). See
        nnfleet.predict."""
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


def predict(model, x, *, y=None, loss=None, batch_size=256, workers=None, scale=None):
    """Predictions of `model` (a Model or a Keras file path) for the rows of `x`, on every core,
    as Keras's model.predict returns them: a float32 array of shape (N, *output), or a list of
    them for several outputs. With `y`, (predictions, per_sample_loss): the loss of each sample,
    shape (N,) (a list for several outputs), under `loss` (default: the file's compile loss).

    Several inputs (outputs, for y) as Keras takes them: a dict keyed by input name, or a list
    of arrays in the model's order. An input of dtype string (a model starting with
    TextVectorization, StringLookup or Hashing) takes a list or array of str. Results do not
    depend on `workers` (default: every core). The arrays are read in place without the GIL and must not change until predict returns.
    Raises DataError (shapes, labels), UsageError (no loss known), ModelError.
    """
    m = _as_model(model)
    call = "predict"
    args = _predict_args(call, loss, batch_size, workers, scale)
    xs = _several(x, "x", m.input_names, call)
    ys = [] if y is None else _several(y, "y", m.output_names, call)
    with _engine():
        preds, losses = m._m.predict(xs, ys, *args)
    if len(preds) == 1:
        preds, losses = preds[0], None if losses is None else losses[0]
    return preds if y is None else (preds, losses)


def evaluate(model, x, y, *, loss=None, metrics=None, batch_size=256, workers=None, scale=None):
    """Keras's model.evaluate: {"loss": ..., "<metric>": ...} of `model` on (x, y), every core.

    `loss` and `metrics` (names, as Keras's compile takes them) default to the model file's own
    compile loss and metrics; x and y as predict takes them. With several outputs "loss" is the loss_weights-weighted sum and
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
    xs, ys = _several(x, "x", m.input_names, call), _several(y, "y", m.output_names, call)
    with _engine():
        return dict(m._m.evaluate(xs, ys, loss, metrics, batch_size, workers, scale))


def _predict_args(call, loss, batch_size, workers, scale):
    """predict's and evaluate's loss, batch_size, workers and scale, checked."""
    return ("" if loss is None else _text(loss, "loss", call),
            _int(batch_size, "batch_size", call),
            0 if workers is None else _int(workers, "workers", call),
            1.0 if scale is None else _float(scale, "scale", call))
