"""What train and search return: Run, SearchRun and their ModelResults."""

from __future__ import annotations

import json
import math

from . import _core
from ._core import UsageError
from ._model import Model, load_model


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
