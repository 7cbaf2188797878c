"""train and train_plan: Python's arguments as a plan, run by the engine."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

from . import _core
from ._args import (_array, _engine, _fail, _flag, _float, _int, _json_default, _path, _plain,
                    _repr, _text)
from ._core import UsageError
from ._progress import FleetProgress
from ._results import Run, _TempFolder

# What on_epoch_end returns to stop that model after this epoch (as early stopping does).
STOP_MODEL = "stop"


# The plan reader's top-level `group_by:` key (the report's per-group view). Until the plan
# reader that knows the key is merged, group_by= is remembered by the Run only; True: it is
# also written into the plan text of train and search.
PLAN_HAS_GROUP_BY = False


def _verbosity(call, verbose, progress):
    """verbose (Keras's: "auto" is 1) and its alias progress (True: 1, False: 0, "json": the
    engine's JSON events) as one level: 0, 1, 2 or "json"."""
    if progress is not None:
        if not (isinstance(verbose, str) and verbose == "auto"):
            _fail(call, "progress", "is an alias of verbose; give one of them",
                  "verbose=0, 1 or 2 alone (progress=True is verbose=1, False is 0)", progress)
        if isinstance(progress, str) and progress == "json":
            return "json"
        if not isinstance(progress, (bool, np.bool_)):
            _fail(call, "progress", "must be True, False or 'json'", "a bool or 'json'",
                  progress)
        return int(bool(progress))
    if isinstance(verbose, str) and verbose == "auto":
        return 1
    if isinstance(verbose, (bool, np.bool_)) or not isinstance(verbose, (int, np.integer)) \
            or int(verbose) not in (0, 1, 2):
        _fail(call, "verbose", "must be 0, 1 or 2", "0 (silent), 1 (a bar and a line per "
              "finished model; the live table on a terminal) or 2 (a line per finished model)",
              verbose)
    return int(verbose)


def _printer(level):
    """What the engine prints (RunOptions::progress) and the FleetProgress Python prints, or
    None. A terminal gets the CLI's live table; Jupyter and logs Python's bar and lines."""
    if level == 0:
        return _core.Progress.QUIET, None
    if level == "json":
        return _core.Progress.JSON, None
    try:
        tty = sys.stdout.isatty() and sys.stdout is sys.__stdout__
    except (AttributeError, ValueError):
        tty = False
    if tty and level == 1:
        return _core.Progress.LIVE, None
    return _core.Progress.QUIET, FleetProgress(level)


def _run_checks(call, workers, out, resume, checkpoint_seconds, format, on_epoch_end, report,
                group_by):
    if workers is not None:
        if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, (int, np.integer)):
            _fail(call, "workers", "must be an integer", "1 or more (None: every core)", workers)
        workers = _int(workers, "workers", call)
    if out is not None and not (isinstance(out, str) and out == ""):
        out = _path(out, "out", call)
    resume = _flag(resume, "resume", call)
    if resume and out is None:
        raise UsageError("failed to resume the run: resume needs the output folder of the run; "
                         "expected out=FOLDER (nnfleet train: --out FOLDER)")
    checkpoint_seconds = _float(checkpoint_seconds, "checkpoint_seconds", call, lo=0.0)
    format = _text(format, "format", call, choices=("keras", "h5", "onnx"))
    if on_epoch_end is not None and not callable(on_epoch_end):
        _fail(call, "on_epoch_end", "must be callable", "a function(name, epoch, logs) or None",
              on_epoch_end)
    report = _flag(report, "report", call)
    if group_by is not None:
        group_by = _text(group_by, "group_by", call)
    return workers, out, resume, checkpoint_seconds, format, report, group_by


def _run(path, text, base_dir, arrays, *, workers, out, resume, checkpoint_seconds, format,
         progress=None, verbose="auto", on_epoch_end=None, report=False, group_by=None,
         hold=False, result=None):
    call = "train"
    workers, out, resume, checkpoint_seconds, format, report, group_by = _run_checks(
        call, workers, out, resume, checkpoint_seconds, format, on_epoch_end, report, group_by)
    level = _verbosity(call, verbose, progress)
    if PLAN_HAS_GROUP_BY and group_by is not None and text.startswith("{"):
        text = "{" + json.dumps("group_by") + ": " + json.dumps(group_by) + ", " + text[1:]
    mode, shown = _printer(level)
    callback = None
    if on_epoch_end is not None or shown is not None:
        def callback(kind, name, epoch, logs, seconds, status):
            if shown is not None:
                shown.event(kind, name, epoch, logs, seconds, status)
            if on_epoch_end is not None and kind == "epoch":
                answer = on_epoch_end(name, epoch, dict(logs))
                return isinstance(answer, str) and answer == STOP_MODEL
            return False
    # Without out= the run's files go to a folder of the Run's own, removed with it: its models
    # are read from there when asked for (reading all 2,000 of a tiny fleet took 6 s).
    folder = _TempFolder() if out is None else None
    try:
        # With on_epoch_end, each model's worker waits at its epoch ends for the callback's
        # answer, so that STOP_MODEL stops that model after this very epoch (not at a later one
        # by timing).
        with _engine():
            r = _core.train(path, text, base_dir, arrays, workers or 0,
                            folder.run_dir if folder else out, resume, checkpoint_seconds,
                            format, mode, callback, hold or on_epoch_end is not None,
                            load_models=False, report=report)
    except BaseException:
        if folder is not None:
            folder.remove()
        raise
    finally:
        if shown is not None:
            shown.finish()
    return (result or Run)(r, folder=folder, group_by=group_by)


def train_plan(path, *, workers=None, out="", resume=False, checkpoint_seconds=2.0,
               format="keras", verbose="auto", progress=None, on_epoch_end=None, report=False,
               group_by=None) -> Run:
    """Runs a plan file as `nnfleet train PATH` does (out="": runs/<plan>-<timestamp>; None: a
    folder of the Run's own, removed with it). verbose, progress, report, group_by: as train's
    (a plan's own `group_by:` key stays the plan's)."""
    return _run(_path(path, "path", "train"), "", "", {}, workers=workers, out=out, resume=resume,
                checkpoint_seconds=checkpoint_seconds, format=format, progress=progress,
                verbose=verbose, on_epoch_end=on_epoch_end, report=report, group_by=group_by)


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
             "on_epoch_end", "checkpoint_seconds", "format", "scale", "verbose", "report",
             "group_by"}


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
          early_stopping=None, seed=0, workers=None, out=None, resume=False, verbose="auto",
          progress=None, on_epoch_end=None, checkpoint_seconds=2.0, format="keras", scale=None,
          report=False, group_by=None, **plan_defaults) -> Run:
    """Trains every model at once, one pinned worker per core, and returns a Run.

    models: a list mixing plan-style dicts ({"name": ..., "layers": [{"Dense": {...}}, ...]}),
    Keras to_json() strings or dicts, .keras/.h5/.json paths and objects with to_json() (a Keras
    model with get_weights() and save() starts from its own weights).
    x, y: NumPy arrays shared by every model (read in place when C-contiguous uint8, int32,
    int64, float32 or float64; else converted once, with a warning), or lists of them, one
    pair per model. validation_split takes the last fraction of x (Keras); test_data=(x, y) is
    evaluated after training. Keyword defaults follow Keras's compile/fit; any other plan
    default (shuffle, batch_split, ...) may be given too. out: keep the output folder there
    (None: a temporary folder of the Run's own, removed with it and its results); resume=True
    continues the run in `out`. verbose (Keras's fit): 0 silent; 1 ("auto") on a terminal the
    CLI's live table, elsewhere (Jupyter, a log) one bar for the fleet (models and epochs
    done, elapsed, estimated rest) and one line per finished model; 2 the model lines only.
    progress: verbose's former name (True: 1, False: 0, "json": the engine's JSON events).
    report=True writes the run's report.html as it goes and at its end (Run.report_path;
    run.report() writes it afterwards too). group_by: a parameter (a grid variable, say) whose
    groups Run.frame() ranks within. Models are read back from their files only when asked
    for (run[name].model). on_epoch_end(name, epoch,
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
        return _run("nnfleet.train", text, os.getcwd(), arrays, workers=workers, out=out,
                    resume=resume, checkpoint_seconds=checkpoint_seconds, format=format,
                    progress=progress, verbose=verbose, on_epoch_end=on_epoch_end,
                    report=report, group_by=group_by, hold=hold)
