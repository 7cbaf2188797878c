"""train and train_plan: Python's arguments as a plan, run by the engine."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

from . import _core
from ._args import (_array, _did_you_mean, _engine, _fail, _flag, _float, _int, _json_default,
                    _path, _plain, _python_call, _repr, _several, _text)
from ._core import UsageError
from ._progress import FleetProgress
from ._results import Run, _TempFolder

# What on_epoch_end returns to stop that model after this epoch (as early stopping does).
STOP_MODEL = "stop"


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


def _save_check(call, save):
    """save= as the engine takes it: "" for the plan's own policy (None)."""
    if save is None:
        return ""
    if not isinstance(save, str):
        _fail(call, "save", "must be a policy", "'all', 'best N' (N >= 1) or 'none'", save)
    return save


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
         hold=False, result=None, save=None):
    call = "train"
    save = _save_check(call, save)
    workers, out, resume, checkpoint_seconds, format, report, group_by = _run_checks(
        call, workers, out, resume, checkpoint_seconds, format, on_epoch_end, report, group_by)
    level = _verbosity(call, verbose, progress)
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
                            load_models=False, report=report, save=save)
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
               group_by=None, save=None) -> Run:
    """Runs a plan file as `nnfleet train PATH` does (out="": runs/<plan>-<timestamp>; None: a
    folder of the Run's own, removed with it). verbose, progress, report, group_by, save: as
    train's (a plan's own `group_by:` key stays the plan's; save= replaces its `save:`)."""
    return _run(_path(path, "path", "train"), "", "", {}, workers=workers, out=out, resume=resume,
                checkpoint_seconds=checkpoint_seconds, format=format, progress=progress,
                verbose=verbose, on_epoch_end=on_epoch_end, report=report, group_by=group_by,
                save=save)


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


# train's own fit keywords, besides those the plan's `defaults:` accepts (_core.plan_defaults_keys:
# the engine's table, so that a key it learns is a keyword at once).
_FIT_KEYS = {"epochs", "batch_size", "loss", "optimizer", "metrics", "early_stopping"}
_RUN_KEYS = {"validation_split", "validation_data", "test_data", "sample_weight", "seed",
             "workers", "out", "resume", "progress", "on_epoch_end", "checkpoint_seconds",
             "format", "scale", "data", "data_key", "verbose", "report", "group_by", "save"}
# Defaults keys that are not keywords: `data` is the per-model data mapping here, and a model's
# architecture (`layers`, `keras`) comes from `models`.
_NOT_DEFAULTS = {"data", "keras", "layers"}


def _defaults_keys():
    return set(_core.plan_defaults_keys()) - _NOT_DEFAULTS


def _fit_args(call, validation_split, validation_data, scale, seed):
    """train's and search's validation_split, scale and seed, checked; validation_split and
    validation_data together refused, as Keras does."""
    if validation_split is not None:
        validation_split = _float(validation_split, "validation_split", call, lo=0.0, hi=1.0,
                                  hi_open=True)
    if scale is not None:
        scale = _float(scale, "scale", call)
    seed = _int(seed, "seed", call, lo=0, hi=2**63 - 1)
    if validation_data is not None and validation_split:
        raise UsageError(f"failed to {call}: validation_split and validation_data both give "
                         "validation data; expected one of them (validation_data is used "
                         "instead of a split, as Keras does)")
    return validation_split, scale, seed


def _class_weight(v):
    """class_weight as Keras takes it ({0: 1.0, 1: 5.0}): int keys as the plan's strings."""
    if not isinstance(v, dict):
        return v
    out = {}
    for k, w in v.items():
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            k = str(int(k))
        out[k] = w
    return out


def _fit_defaults(call, given, plan_defaults, known):
    """The plan's `defaults:` from the fit keywords `given` (pairs; None: not given) and the
    other plan defaults (an unknown keyword refused, with a near miss and the valid ones)."""
    defaults = {k: _plain(v, k, call) for k, v in given if v is not None}
    accepted = _defaults_keys() - known
    for k, v in plan_defaults.items():
        if k not in accepted:
            # The plan defaults listed (the call's own keywords are in its signature).
            fit = sorted(accepted | (known & _FIT_KEYS))
            raise UsageError(f"failed to {call}: unknown keyword {_repr.repr(k)}"
                             f"{_did_you_mean(k, fit + sorted(known))}; expected one of the "
                             f"call's keywords or a plan default: {', '.join(fit)}")
        if k == "class_weight":
            v = _class_weight(v)
        defaults[k] = _plain(v, k, call)
    return defaults


def _parts(v, name, call, allowed=("x", "y", "sample_weight")):
    """(x, y, sample_weight) of a Keras tuple (x, y) / (x, y, sample_weight) or a dict."""
    expected = "(x, y) or (x, y, sample_weight)"
    if isinstance(v, dict):
        for k in v:
            if k not in allowed:
                _fail(call, name, f"has an unknown key {_repr.repr(k)}"
                      f"{_did_you_mean(k, allowed)}", "keys among " + ", ".join(allowed), v)
        return v.get("x"), v.get("y"), v.get("sample_weight")
    if not isinstance(v, (list, tuple)) or len(v) not in (2, 3):
        _fail(call, name, "must be a pair or a triple", expected, v)
    return v[0], v[1], v[2] if len(v) == 3 else None


class _Names:
    """The input and output names the models share, for x and y given as dicts."""

    def __init__(self, entries):
        self.inputs = self.outputs = None
        self._entries = entries
        self._read = False

    def resolve(self, call):
        """Reads the names from the Keras models (once; a plan-style model names none)."""
        if self._read:
            return self
        self._read = True
        for i, e in enumerate(self._entries):
            if "keras" not in e:
                continue
            with _engine():
                m = _core.Model.load(e["keras"], "", [])
            ins, outs = [n for n, _ in m.inputs], [n for n, _ in m.outputs]
            if self.inputs is not None and (ins, outs) != (self.inputs, self.outputs):
                raise UsageError(f"failed to {call}: x or y is a dict keyed by name, but "
                                 f"models[{i}] names its inputs and outputs {ins} and {outs}, "
                                 f"not {self.inputs} and {self.outputs} as the models before "
                                 "it; expected models sharing their names (or lists in order)")
            self.inputs, self.outputs = ins, outs
        return self


def _source(x, y, sw, tag, what, arrays, call, names):
    """A plan data source of arrays given in place, registered in `arrays` under `tag`."""
    if isinstance(x, dict) or isinstance(y, dict):
        names = names.resolve(call) if isinstance(names, _Names) else names
    label = (lambda k: f"{what}{k}") if what else (lambda k: k)
    ins = getattr(names, "inputs", None)
    outs = getattr(names, "outputs", None)
    src = {}
    for key, value, known in (("x", x, ins), ("y", y, outs)):
        if value is None:
            _fail(call, label(key), "is required", "an array (or one per input or output)", value)
        got = _several(value, label(key), known, call)
        refs = []
        for k, a in enumerate(got):
            arrays[f"{key}{tag}.{k}"] = a
            refs.append({"array": f"{key}{tag}.{k}"})
        src[key] = refs[0] if len(refs) == 1 else refs
    if sw is not None:
        arrays[f"w{tag}"] = _array(sw, label("sample_weight"))
        src["sample_weight"] = {"array": f"w{tag}"}
    return src


def _data(x, y, tag, validation_split, test_data, scale, arrays, call="train", *,
          sample_weight=None, validation_data=None, names=None, where=""):
    """A plan `data:` mapping of the arrays given (several inputs and outputs as dicts or lists)."""
    d = {"train": _source(x, y, sample_weight, tag, where, arrays, call, names)}
    if validation_split:
        d["validation_split"] = validation_split
    if scale is not None:
        d["scale"] = scale
    for key, v, part in (("validation_data", validation_data, "validation"),
                         ("test_data", test_data, "test")):
        if v is not None:
            vx, vy, vw = _parts(v, f"{where}{key}", call)
            d[part] = _source(vx, vy, vw, f"{tag}:{part}", f"{where}{key}'s ", arrays, call,
                              names)
    return d


_PER_KEY = ("x", "y", "sample_weight", "validation_data", "test_data")


def _per_model_data(data, data_key, entries, common, arrays, call, names):
    """train's `data=`: every model expanded over the mapping's keys through the placeholder
    {data_key} (recorded as the models' parameter, as a plan's grid variable is), each key's
    arrays its own source. Returns (plan entries, the index in `models` of each)."""
    if not isinstance(data, dict) or not data:
        _fail(call, "data", "must be a non-empty mapping", "{key: (x, y), ...} with "
              "'{" + str(data_key) + "}' in the model names", data)
    keys, sources = [], {}
    for k, v in data.items():
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (str, int, np.integer)) or (
                isinstance(k, str) and (not k or any(c in k for c in "{}[]\0"))):
            _fail(call, "data", "has a key that is not a plain name", "str keys without "
                  "braces or brackets, or ints", k)
        k = k if isinstance(k, str) else int(k)
        where = f"data[{k!r}]"
        if isinstance(v, dict):
            x, y, sw = _parts(v, where, call, _PER_KEY)
            vd, td = v.get("validation_data"), v.get("test_data")
        else:
            (x, y, sw), vd, td = _parts(v, where, call), None, None
        if vd is not None and common["validation_split"]:
            _fail(call, f"{where}['validation_data']", "is given with validation_split",
                  "one of them (as Keras)", vd)
        if str(k) in map(str, sources):  # 3 and "3" would be one name in the models
            _fail(call, "data", "has two keys of the same name", "distinct keys", k)
        test = td if td is not None else common["test_data"]
        sources[k] = _data(x, y, f"[{k}]", common["validation_split"], test, common["scale"],
                           arrays, call, sample_weight=sw, validation_data=vd, names=names,
                           where=f"{where}'s ")
        keys.append(k)
    return _expand(entries, data_key, keys, sources)


def _substituted(v, placeholder, value):
    if isinstance(v, str):
        return v.replace(placeholder, value)
    if isinstance(v, list):
        return [_substituted(e, placeholder, value) for e in v]
    if isinstance(v, dict):
        return {k: _substituted(e, placeholder, value) for k, e in v.items()}
    return v


def _expand(entries, data_key, keys, sources):
    """Each model entry once per key (model by model, as a plan's grid orders them), its strings'
    {data_key} replaced by the key, its data the key's source, the key its parameter."""
    placeholder = "{" + data_key + "}"
    out, origin = [], []
    for i, e in enumerate(entries):
        if "data" in e:
            raise UsageError(f"failed to train: models[{i}] has its own 'data' and data= gives "
                             "every model its data; expected one of them")
        if placeholder not in e["name"]:
            e = dict(e, name=e["name"] + "-" + placeholder)
        for k in keys:
            m = _substituted(e, placeholder, str(k))
            m["data"] = sources[k]
            m["parameters"] = dict(m.get("parameters") or {}, **{data_key: k})
            out.append(m)
            origin.append(i)
    return out, origin


def _train_data(plan, entries, x, y, data, data_key, fit, arrays):
    """train's data: the plan's own (x and y) or each model's (data=), the arrays given in
    `arrays`. Returns (plan entries, the index in `models` of each)."""
    call = "train"
    names = _Names(entries)
    if data is None:
        plan["data"] = _data(x, y, "", fit["validation_split"], fit["test_data"], fit["scale"],
                             arrays, call, sample_weight=fit["sample_weight"],
                             validation_data=fit["validation_data"], names=names)
        return entries, list(range(len(entries)))
    if any(v is not None for v in (x, y, fit["sample_weight"], fit["validation_data"])):
        raise UsageError("failed to train: data= gives each model its own arrays; expected x, "
                         "y, sample_weight and validation_data inside it (per key), not as "
                         "keywords too")
    data_key = _text(data_key, "data_key", call)
    if not data_key.isidentifier():
        _fail(call, "data_key", "must be a name", "an identifier such as 'series'", data_key)
    return _per_model_data(data, data_key, entries, fit, arrays, call, names)


def train(models, x=None, y=None, *, validation_split=None, validation_data=None,
          test_data=None, sample_weight=None, data=None, data_key="series", epochs=None,
          batch_size=None, loss=None, optimizer=None, metrics=None, early_stopping=None, seed=0,
          workers=None, out=None, resume=False, verbose="auto", progress=None, on_epoch_end=None,
          checkpoint_seconds=2.0, format="keras", scale=None, report=False, group_by=None,
          save=None, **plan_defaults) -> Run:
    """Trains every model at once, one pinned worker per core, and returns a Run.

    models: a list mixing plan-style dicts ({"name": ..., "layers": [{"Dense": {...}}, ...]}),
    Keras to_json() strings or dicts, .keras/.h5/.json paths and objects with to_json() (a Keras
    model with get_weights() and save() starts from its own weights).
    x, y: NumPy arrays shared by every model (read in place when C-contiguous uint8, int32,
    int64, float32 or float64; else converted once, with a warning). Several inputs or outputs
    as Keras takes them: a dict keyed by input (output) name, or a list of arrays in the
    model's order (a nested list of numbers is one array). A string input (a model whose
    first layer is TextVectorization, StringLookup or Hashing) takes a list or array of str;
    layers without their vocabulary or statistics (TextVectorization, the lookups,
    Normalization) adapt on the training rows first. sample_weight: one weight per
    sample. validation_split takes the last fraction of x (Keras); validation_data=(x, y) or
    (x, y, sample_weight) validates on arrays of their own instead (not both; the engine then
    holds one copy of the training arrays with the validation rows after them); test_data=(x, y)
    or (x, y, sample_weight) is evaluated after training.
    data: per-model data instead of x and y, {key: (x, y) or (x, y, sample_weight) or {"x",
    "y", "sample_weight", "validation_data", "test_data"}}: every model is trained once per key
    on that key's arrays, "{series}" in its dict (its name, else "-{series}" is appended)
    replaced by the key, which it records as its parameter `series` (data_key= renames it).
    Keyword defaults follow Keras's compile/fit; every key of a plan's `defaults:` may be given
    too (class_weight={0: 1.0, 1: 5.0}, reduce_lr_on_plateau={...}, shuffle, batch_split, ...).
    out: keep the output folder there (None: a temporary folder of the Run's own, removed with
    it and its results); resume=True continues the run in `out`. verbose (Keras's fit): 0
    silent; 1 ("auto") on a terminal the CLI's live table, elsewhere (Jupyter, a log) one bar
    for the fleet (models and epochs done, elapsed, estimated rest) and one line per finished
    model; 2 the model lines only. progress: verbose's former name (True: 1, False: 0, "json":
    the engine's JSON events). report=True writes the run's report.html as it goes and at its
    end (Run.report_path; run.report() writes it afterwards too). group_by: a parameter (a grid
    variable, the data= key) whose groups Run.frame() ranks within. save: which trained models
    keep their file, "all", "best N" (the N best by the leaderboard's metric, ties in list
    order) or "none" (None: all up to 10,000 models, the best 100 above); every model's results
    and history are kept whatever it says, and run[name].model is None for a model without its
    file. Models are read back from
    their files only when asked for (run[name].model). on_epoch_end(name, epoch, logs) is
    called on this thread while that model's worker waits for it; returning nnfleet.STOP_MODEL ("stop") ends that model after this epoch, as
    early stopping would (status "done"). Ctrl-C stops every model cleanly (checkpointed in
    `out`), then raises KeyboardInterrupt; on another thread, nnfleet.stop() (or the
    interpreter's exit) stops it and it returns a Run with `interrupted` set. The arrays are
    read in place without the GIL: they must not change until train returns (a model whose
    labels or ids go out of range because one did ends as "failed", saying so). Results are
    bit-identical to `nnfleet train` on the same plan.
    Raises PlanError (every problem listed, by keyword and models[i]), DataError, ModelError,
    FileError, UsageError.
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
        plan = {"seed": seed, "defaults": defaults}
        if group_by is not None:  # the plan's own key: the report's per-group view
            plan["group_by"] = _text(group_by, "group_by", call)
        fit = {"validation_split": validation_split, "validation_data": validation_data,
               "test_data": test_data, "sample_weight": sample_weight, "scale": scale}
        entries, origin = _train_data(plan, entries, x, y, data, data_key, fit, arrays)
        plan["models"] = entries
        text = json.dumps(plan, indent=1, default=_json_default)
        with _python_call(call, [(origin[k], e["name"]) for k, e in enumerate(entries)]):
            return _run("nnfleet.train", text, os.getcwd(), arrays, workers=workers, out=out,
                        resume=resume, checkpoint_seconds=checkpoint_seconds, format=format,
                        progress=progress, verbose=verbose, on_epoch_end=on_epoch_end,
                        report=report, group_by=group_by, hold=hold, save=save)
