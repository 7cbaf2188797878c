"""What train and search return: Run, SearchRun and their ModelResults."""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import tempfile
import weakref

from . import _core
from ._args import _engine, _fail, _path, _text
from ._core import UsageError
from ._model import load_model


class _TempFolder:
    """A run folder of Python's own (tempfile.mkdtemp, prefix nnfleet-run-), for a run without
    out=: removed when neither its Run nor any of its ModelResults is left (weakref.finalize),
    or at the interpreter's exit. The engine writes the run into <path>/run (a folder it
    creates), as it did into its own temporary folder."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="nnfleet-run-")
        self.run_dir = os.path.join(self.path, "run")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)

    def remove(self):
        self._finalizer()


class ModelResult:
    """One model's outcome: name, status ("done", "diverged", "failed", "cancelled", or
    "pruned": a search's scheduler stopped it), message, metrics (final values: with
    restore_best_weights the kept epoch's), last_metrics (the last epoch's), history (Keras
    History.history: {"loss": [...], ...}), best ({"epoch", "monitor", "value"} or None), epochs,
    params, seconds, model (a Model, read from model_file when first asked for, or None),
    model_file, parameters ({name: value}: its grid's vars, its search trial's values, its plan
    entry's `parameters:`), rungs (a search trial's [(epochs, value, decision), ...]; decision
    "promoted", "pruned", "final" or "stopped").
    """

    def __init__(self, r, folder=None):
        # r: the engine's result (_core.ModelResult, nnfleet/results.h), read once.
        self.name = r.name
        self.status = _core.status_name(r.status)
        self.message = r.message
        self.metrics = dict(r.metrics)
        # With restore_best_weights, metrics are the kept epoch's and these the last epoch's
        # (the engine leaves them empty when the two are one epoch: then metrics).
        self.last_metrics = dict(r.last_metrics) or dict(self.metrics)
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
        self._model = None
        self._folder = folder  # the Run's own folder, kept while this result is
        hist = {}
        epochs = []
        seconds = []
        for e in r.history:
            epochs.append(e.epoch)
            seconds.append(e.seconds)
            for k, v in e.values:
                hist.setdefault(k, []).append(v)
        self.history = hist
        self.epoch = epochs
        self.epoch_seconds = seconds

    @property
    def model(self):
        """The trained Model, read from model_file when first asked for (None: no model file,
        as for a pruned, failed or diverged model). Reading a model back takes about 3 ms for a
        tiny one: 6 s of a 2,000-model run whose models nobody looked at, when train read them
        all. Without out= the file is in the Run's own folder, kept while this result is."""
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


def _pandas(what, plain):
    try:
        import pandas
    except ImportError:
        raise UsageError(f"failed to make {what} DataFrame: pandas is not importable; expected "
                         f"pandas installed (pip install pandas, or Debian's python3-pandas), "
                         f"or use {plain}") from None
    return pandas


def _union(dicts):
    """The keys of `dicts` in order of first appearance."""
    keys = {}
    for d in dicts:
        for k in d:
            keys.setdefault(k, None)
    return list(keys)


# _repr_html_ shows the leaderboard's best rows: a notebook cell of 2,000 rows is unreadable.
HTML_ROWS = 20


class Run:
    """The results of `train`: iterate for ModelResults in plan order, or index by name.

    `out` is the output folder given ("" without out=), `folder` the run's folder (out's, or
    without out= a temporary one of the Run's own, removed with it and its ModelResults),
    `interrupted` whether the run was stopped, `exit_code` what `nnfleet train` would have
    exited with. rank_by, higher_is_better: the leaderboard's metric and direction; ranking:
    the results' indices best first; best: the first finished one. group_by: the parameter
    frame() ranks within by default.
    report_path: report.html as report=True wrote it ("" without; report_error says why not).

    Tables: rows() / frame() one row per model, history_rows() / history_frame() one per
    (model, epoch); frame() and history_frame() are pandas DataFrames (pandas is optional).
    report(path) writes the run's report.html. In Jupyter a Run shows as its leaderboard.
    """

    def __init__(self, r, folder=None, group_by=None):
        self._folder = folder
        self.results = [ModelResult(m, folder) for m in r.models]
        self.out = "" if folder is not None else r.out_dir
        self.folder = r.out_dir
        self.interrupted = r.interrupted
        self.write_error = r.write_error
        self.makespan = r.makespan
        self.workers = r.workers
        self.rank_by = r.rank_by
        self.higher_is_better = r.rank_higher_is_better
        self.ranking = list(r.ranking)
        self.report_path = r.report_path
        self.report_error = r.report_error
        self.group_by = group_by
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

    @property
    def best(self):
        """The leaderboard's first finished ("done") model with its ranking metric (rank_by),
        or None: what `nnfleet train` prints at the top of its leaderboard."""
        for k in self.ranking:
            m = self.results[k]
            value = m.metrics.get(self.rank_by)
            if m.status == "done" and value is not None and not math.isnan(value):
                return m
        return None

    def ranks(self, group_by=None):
        """Each model's rank in plan order: its place on the leaderboard (1: best; models
        without the metric last, as the leaderboard puts them), or within its group of equal
        `group_by` parameter values."""
        groups = self._groups(group_by)
        ranks = [0] * len(self.results)
        seen = {}
        for k in self.ranking:
            g = groups[k] if groups else None
            seen[g] = seen.get(g, 0) + 1
            ranks[k] = seen[g]
        return ranks

    def _groups(self, group_by):
        if group_by is None:
            return None
        names = _union(m.parameters for m in self.results)
        if group_by not in names:
            _fail("rank the models", "group_by", "must name a parameter of the models",
                  "one of " + (", ".join(names) or "(none: the models record no parameters)"),
                  group_by)
        return [json.dumps(m.parameters.get(group_by), sort_keys=True) for m in self.results]

    def rows(self, group_by=None):
        """One dict per model in plan order: name, status, epochs, best_epoch, each final
        metric, each parameter, params, seconds, rank (within groups of `group_by`, default
        the Run's group_by). A metric or parameter a model lacks is None."""
        group_by = self.group_by if group_by is None else group_by
        ranks = self.ranks(group_by)
        metrics = _union(m.metrics for m in self.results)
        params = _union(m.parameters for m in self.results)
        fixed = {"name", "status", "epochs", "best_epoch", "params", "seconds", "rank"}
        rows = []
        for m, rank in zip(self.results, ranks):
            row = {"name": m.name, "status": m.status, "epochs": m.epochs,
                   "best_epoch": m.best["epoch"] if m.best else None}
            for k in metrics:
                row[k] = m.metrics.get(k)
            for k in params:  # a parameter named like a column keeps both: param:<name>
                row[k if k not in fixed and k not in row else f"param:{k}"] = \
                    m.parameters.get(k)
            row.update(params=m.params, seconds=m.seconds, rank=rank)
            rows.append(row)
        return rows

    def frame(self, group_by=None):
        """rows() as a pandas DataFrame (one row per model, plan order). Raises UsageError
        without pandas (Debian's python3-pandas), or for a group_by naming no parameter."""
        pandas = _pandas("the results'", "run.rows() or run.results (plain lists)")
        return pandas.DataFrame(self.rows(group_by))

    def history_rows(self):
        """One dict per (model, epoch) in plan order: model, epoch, each history column (None
        where a model lacks it), seconds: history.csv's rows."""
        columns = _union(m.history for m in self.results)
        rows = []
        for m in self.results:
            for i, epoch in enumerate(m.epoch):
                row = {"model": m.name, "epoch": epoch}
                for c in columns:
                    values = m.history.get(c)
                    row[c] = values[i] if values is not None and i < len(values) else None
                row["seconds"] = m.epoch_seconds[i]
                rows.append(row)
        return rows

    def history_frame(self):
        """history_rows() as a pandas DataFrame (long format). Raises UsageError without
        pandas."""
        pandas = _pandas("the histories'", "run.history_rows() or each result's history")
        return pandas.DataFrame(self.history_rows())

    def report(self, path=None, group_by=None):
        """Writes the run's self-contained report.html (as `nnfleet report` does) in its
        folder and, with `path` (a file, or a folder to hold report.html), copies it there;
        returns the path written. Works without out= (the Run's own folder). group_by: a
        parameter whose groups the report ranks within (default: the run's group_by)."""
        call = "write the report"
        group_by = self.group_by if group_by is None else _text(group_by, "group_by", call)
        if not self.folder or not os.path.isdir(self.folder):
            _fail(call, "the run's folder", "does not exist", "a run with its folder (the "
                  "output folder was removed?)", self.folder)
        with _engine():
            written = _core.write_report(self.folder, group_by or "")
        if path is None:
            return written
        target = _path(path, "path", call)
        if os.path.isdir(target):
            target = os.path.join(target, "report.html")
        shutil.copyfile(written, target)
        return target

    def _repr_html_(self):
        metrics = _union(m.metrics for m in self.results)
        if self.rank_by in metrics:  # the ranking metric first
            metrics.remove(self.rank_by)
            metrics.insert(0, self.rank_by)
        metrics = metrics[:6]
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in
                       ["rank", "name", "status", "epochs", *metrics, "params", "seconds"])
        body = []
        for place, k in enumerate(self.ranking[:HTML_ROWS], 1):
            m = self.results[k]
            cells = [str(place), esc(m.name), esc(m.status), str(m.epochs)]
            cells += [_cell(m.metrics.get(c)) for c in metrics]
            cells += [f"{m.params:,}", f"{m.seconds:.2f}"]
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        more = len(self.ranking) - HTML_ROWS
        if more > 0:
            body.append(f'<tr><td colspan="{len(metrics) + 6}">... {more} more</td></tr>')
        title = (f"nnfleet run: {len(self)} model(s), ranked by {esc(self.rank_by or '-')} "
                 f"({'higher' if self.higher_is_better else 'lower'} is better)")
        return (f"<div><p>{title}</p><table><thead><tr>{head}</tr></thead><tbody>"
                + "".join(body) + "</tbody></table></div>")

    def __repr__(self):
        return f"<nnfleet.Run {len(self)} model(s), out={self.out!r}>"


def _cell(v):
    return "" if v is None else f"{v:.4g}"


class SearchRun(Run):
    """The results of `search`, a Run whose models are its trials in trial order: each
    ModelResult has `parameters` ({name: value}) and `rungs` ([(epochs, value, decision), ...],
    decision "promoted", "pruned", "final" or "stopped"), and status "pruned" when the scheduler
    stopped it at a rung (its figures are that rung's; no model).

    metric, higher_is_better: what the search compared. best: the finished ("done") trial with
    the best metric (the first of equal ones), or None. trials: one dict per trial (trial, name,
    status, epochs, metric, rungs and each parameter). trials_frame(): them as a pandas DataFrame.
    """

    def __init__(self, r, folder=None, group_by=None):
        super().__init__(r, folder, group_by)
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
        pandas = _pandas("the trials'", "run.trials")
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
