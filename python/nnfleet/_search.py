"""search: sampled spaces and schedulers (README "Search"), as plans with a `search:` section."""

from __future__ import annotations

import json
import os

from . import _core
from ._args import (_engine, _fail, _float, _int, _int_from, _json_default, _plain,
                    _python_call, _repr, _text)
from ._core import UsageError
from ._results import SearchRun
from ._train import _FIT_KEYS, _RUN_KEYS, _Names, _data, _fit_args, _fit_defaults, _run


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
           sample_weight=None, batch_size=None, loss=None, optimizer=None, metrics=None,
           early_stopping=None, seed=0, workers=None, out=None, resume=False, verbose="auto",
           progress=None, on_epoch_end=None, checkpoint_seconds=2.0, format="keras", scale=None,
           report=False, group_by=None, **plan_defaults) -> SearchRun:
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
    The other keywords are train's (epochs is max_epochs here; x and y as dicts or lists for
    several inputs and outputs, sample_weight, validation_data=(x, y[, sample_weight]) and every
    plan default; not data=; verbose's bar counts each trial's max_epochs, less what a pruned
    trial did not train). Without on_epoch_end the result
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
    known = (_FIT_KEYS - {"epochs"}) | (_RUN_KEYS - {"data", "data_key"})
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
            "data": _data(x, y, "", validation_split, test_data, scale, arrays, call,
                          sample_weight=sample_weight, validation_data=validation_data,
                          names=_Names(entries))}
    if group_by is not None:  # the plan's own key: the report's per-group view
        plan["group_by"] = _text(group_by, "group_by", call)
    text = json.dumps(plan, indent=1, default=_json_default)
    with _python_call(call, list(enumerate(e["name"] for e in entries))):
        return _run("nnfleet.search", text, os.getcwd(), arrays, workers=workers, out=out,
                    resume=resume, checkpoint_seconds=checkpoint_seconds, format=format,
                    progress=progress, verbose=verbose, on_epoch_end=on_epoch_end,
                    report=report, group_by=group_by, result=SearchRun)
