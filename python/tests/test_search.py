# nnfleet.search: Trial's draws (the engine's sample_parameter), build(trial) and space dicts as
# plans with a `search:` section, the trials' results (parameters, rungs, "pruned", best,
# trials, trials_frame), every argument error by name, and on_epoch_end's STOP_MODEL.
import sys

import pytest

import nnfleet
from conftest import FIT, MODELS

SPACE = {"units": {"int": [2, 8]}, "lr": {"loguniform": [1.0e-3, 1.0e-1]},
         "act": {"choice": ["relu", "tanh"]}}
TEMPLATE = {"name": "trial-{trial}",
            "layers": [{"Flatten": {}}, {"Dense": {"units": "{units}", "activation": "{act}"}},
                       {"Dense": {"units": 3, "activation": "softmax"}}],
            "optimizer": {"Adam": {"learning_rate": "{lr}"}}}
# 6 trials, successive halving over 1 and 3 epochs: the best 6/3 = 2 of rung 1 go on.
SEARCH = dict(trials=6, min_epochs=1, max_epochs=3, reduction_factor=3, metric="val_accuracy",
              validation_split=0.25, batch_size=16, loss="sparse_categorical_crossentropy",
              metrics=["accuracy"], seed=5, workers=2, progress=False)


def build_like_template(trial):
    """The model TEMPLATE makes of SPACE, drawn through the trial."""
    units = trial.int("units", 2, 8)
    lr = trial.loguniform("lr", 1.0e-3, 1.0e-1)
    act = trial.choice("act", ["relu", "tanh"])
    return {"layers": [{"Flatten": {}}, {"Dense": {"units": units, "activation": act}},
                       {"Dense": {"units": 3, "activation": "softmax"}}],
            "optimizer": {"Adam": {"learning_rate": lr}}}


def draws(trial):
    return (trial.uniform("u", 0.0, 1.0), trial.loguniform("l", 1e-4, 1e-1),
            trial.int("i", 1, 100), trial.int("s", 0, 60, step=4), trial.int("g", 1, 512, log=True),
            trial.choice("c", ["a", "b", 3, True]), trial.fixed("f", 0.9))


def test_trial_draws_depend_only_on_the_seed_the_trial_and_the_name():
    a = draws(nnfleet.Trial(3, seed=7))
    assert a == draws(nnfleet.Trial(3, seed=7))
    # Drawn in another order, or with another parameter before it, a value is the same.
    b = nnfleet.Trial(3, seed=7)
    b.uniform("other", 0.0, 1.0)
    assert b.int("i", 1, 100) == a[2] and b.uniform("u", 0.0, 1.0) == a[0]
    assert list(b.params) == ["other", "i", "u"]
    assert a != draws(nnfleet.Trial(4, seed=7)) and a != draws(nnfleet.Trial(3, seed=8))
    assert 0.0 <= a[0] < 1.0 and 1e-4 <= a[1] < 1e-1 and 1 <= a[2] <= 100
    assert a[3] % 4 == 0 and 0 <= a[3] <= 60 and 1 <= a[4] <= 512 and a[6] == 0.9
    assert a[5] in ("a", "b", 3, True)
    assert isinstance(a[2], int) and isinstance(a[4], int)


def test_trial_draws_spread_over_the_range():
    values = [nnfleet.Trial(k, seed=1).int("i", 0, 9) for k in range(200)]
    assert set(values) == set(range(10))
    sobol = [nnfleet.Trial(k, seed=1, sampler="sobol").uniform("u", 0.0, 1.0) for k in range(16)]
    assert len(set(sobol)) == 16 and all(0.0 <= u < 1.0 for u in sobol)


def test_a_name_drawn_again_returns_its_value_and_another_distribution_is_an_error():
    t = nnfleet.Trial(0)
    v = t.uniform("lr", 0.0, 1.0)
    assert t.uniform("lr", 0.0, 1.0) == v
    with pytest.raises(nnfleet.UsageError, match=r"parameter 'lr' is drawn twice with "
                                                 r"different distributions; expected"):
        t.uniform("lr", 0.0, 2.0)
    with pytest.raises(nnfleet.UsageError, match="'lr'"):
        t.choice("lr", [1, 2])


def test_bad_distributions_are_the_engines_errors_naming_the_parameter():
    t = nnfleet.Trial(0)
    for bad, rule in ((lambda: t.uniform("w", 1.0, 1.0), "empty range; expected lo < hi"),
                      (lambda: t.loguniform("w", 0.0, 1.0), "expected lo > 0"),
                      (lambda: t.int("w", 5, 1), "empty range; expected lo <= hi"),
                      (lambda: t.choice("w", []), "empty choice"),
                      (lambda: t.int("w", 1, 5, step=0), "expected a positive integer")):
        with pytest.raises(nnfleet.UsageError, match=f"parameter 'w': .*{rule}"):
            bad()
    with pytest.raises(nnfleet.UsageError, match="name must be a string"):
        t.uniform(3, 0.0, 1.0)
    assert t.params == {}


def test_build_is_called_once_per_trial_in_order_before_anything_trains(data):
    x, y = data
    calls, seen_at_first_epoch = [], []

    def build(trial):
        calls.append((trial.number, dict(trial.params)))
        return build_like_template(trial)

    def epoch_end(name, epoch, logs):
        if not seen_at_first_epoch:
            seen_at_first_epoch.append(len(calls))

    run = nnfleet.search(build, x, y, on_epoch_end=epoch_end, **SEARCH)
    assert calls == [(k, {}) for k in range(6)]
    assert seen_at_first_epoch == [6]
    assert run.keys() == [f"trial-{k}" for k in range(6)]
    for k, m in enumerate(run):
        t = nnfleet.Trial(k, seed=5)
        build_like_template(t)
        assert m.parameters == t.params


def test_trial_names_are_padded_to_the_digits_of_the_last(data):
    x, y = data
    run = nnfleet.search(lambda t: {"layers": MODELS[0]["layers"]}, x, y,
                         **{**SEARCH, "trials": 11, "max_epochs": 1, "scheduler": "none"})
    assert run.keys() == [f"trial-{k:02d}" for k in range(11)]
    assert all(m.status == "done" and m.parameters == {} for m in run)


def check_halving(run):
    """6 trials over rungs 1 and 3: 2 promoted and done, 4 pruned at epoch 1."""
    assert len(run) == 6
    done = [k for k, m in enumerate(run) if m.status == "done"]
    pruned = [k for k, m in enumerate(run) if m.status == "pruned"]
    assert len(done) == 2 and len(pruned) == 4
    for k in pruned:
        assert run[k].epochs == 1 and [d for _, _, d in run[k].rungs] == ["pruned"]
        assert run[k].rungs[0][0] == 1 and run[k].model is None
    for k in done:
        assert run[k].epochs == 3 and [(e, d) for e, _, d in run[k].rungs] == [
            (1, "promoted"), (3, "final")]
        assert run[k].rungs[-1][1] == run[k].metrics["val_accuracy"]
        assert run[k].model is not None
    # The promoted are the best of rung 1 by val_accuracy (max), ties to the lower trial.
    order = sorted(range(6), key=lambda k: (-run[k].rungs[0][1], k))
    assert sorted(order[:2]) == done
    for m in run:
        p = m.parameters
        assert list(p) == ["units", "lr", "act"]
        assert isinstance(p["units"], int) and 2 <= p["units"] <= 8
        assert 1e-3 <= p["lr"] < 1e-1 and p["act"] in ("relu", "tanh")
    return done


def test_a_space_search_prunes_and_reports_its_trials(data):
    x, y = data
    run = nnfleet.search(SPACE, x, y, model=TEMPLATE, **SEARCH)
    assert isinstance(run, nnfleet.SearchRun) and isinstance(run, nnfleet.Run)
    done = check_halving(run)
    best = max(done, key=lambda k: (run[k].metrics["val_accuracy"], -k))
    assert run.best is run[best]
    assert run.metric == "val_accuracy" and run.higher_is_better
    rows = run.trials
    assert [r["trial"] for r in rows] == list(range(6))
    assert rows[0].keys() == {"trial", "name", "status", "epochs", "metric", "rungs", "units",
                              "lr", "act"}
    assert all(r["metric"] == run[r["trial"]].metrics["val_accuracy"] for r in rows)
    frame = run.trials_frame()
    assert list(frame.columns) == ["trial", "name", "status", "epochs", "val_accuracy", "rung_1",
                                   "rung_3", "units", "lr", "act"]
    assert list(frame["status"]) == [m.status for m in run]
    assert frame["rung_3"].isna().sum() == 4
    # The same space drawn by build(trial) is the same search.
    built = nnfleet.search(build_like_template, x, y, **SEARCH)
    assert [m.parameters for m in built] == [m.parameters for m in run]
    assert [m.status for m in built] == [m.status for m in run]
    assert [m.rungs for m in built] == [m.rungs for m in run]


def test_trials_frame_without_pandas_is_a_clear_error(data, monkeypatch):
    x, y = data
    run = nnfleet.search(SPACE, x, y, model=TEMPLATE, **{**SEARCH, "trials": 2,
                                                          "scheduler": "none", "max_epochs": 1})
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(nnfleet.UsageError, match="pandas is not importable; expected pandas"):
        run.trials_frame()
    assert len(run.trials) == 2


def test_best_is_none_without_a_finished_trial(data):
    x, y = data
    diverging = {"layers": MODELS[0]["layers"], "optimizer": {"SGD": {"learning_rate": 1e30}}}
    run = nnfleet.search(lambda t: diverging, x, y,
                         **{**SEARCH, "trials": 2, "scheduler": "none", "max_epochs": 1,
                            "metric": "val_loss"})
    assert {m.status for m in run} <= {"diverged", "failed"}
    assert run.best is None and not run.higher_is_better


def test_on_epoch_end_stop_model_stops_that_model_after_the_epoch(data):
    x, y = data
    whole = nnfleet.train(MODELS, x, y, seed=3, progress=False, **FIT)

    def stop_cnn(name, epoch, logs):
        if name == "cnn" and epoch == 2:
            return nnfleet.STOP_MODEL
        return "keep going"  # any other answer changes nothing

    run = nnfleet.train(MODELS, x, y, seed=3, progress=False, on_epoch_end=stop_cnn, **FIT)
    assert run["cnn"].status == "done" and run["cnn"].epochs == 2
    assert run["cnn"].history["loss"] == whole["cnn"].history["loss"][:2]
    assert run["mlp"].epochs == 3 and run["mlp"].metrics == whole["mlp"].metrics
    assert nnfleet.STOP_MODEL == "stop"
    run = nnfleet.train(MODELS, x, y, seed=3, progress=False, **FIT,
                        on_epoch_end=lambda name, epoch, logs: "stop")
    assert [m.epochs for m in run] == [1, 1]


def test_a_search_trial_stops_on_stop_model(data):
    x, y = data
    run = nnfleet.search(SPACE, x, y, model=TEMPLATE, **{**SEARCH, "scheduler": "none",
                                                          "trials": 2, "max_epochs": 3},
                         on_epoch_end=lambda n, e, logs: "stop" if n == "trial-1" else None)
    assert [m.epochs for m in run] == [3, 1]
    # In a halving search the promoted trials stopped at epoch 2 end done there, before rung 3.
    whole = nnfleet.search(SPACE, x, y, model=TEMPLATE, **SEARCH)
    run = nnfleet.search(SPACE, x, y, model=TEMPLATE, **SEARCH,
                         on_epoch_end=lambda n, e, logs: nnfleet.STOP_MODEL if e == 2 else None)
    assert [m.status for m in run] == [m.status for m in whole]
    for a, b in zip(run, whole):
        assert a.epochs == (2 if b.status == "done" else 1)
        assert a.rungs == b.rungs[:1]


def test_a_sobol_search_draws_the_same_from_a_space_and_from_build(data):
    x, y = data
    kw = {**SEARCH, "sampler": "sobol", "scheduler": "none", "max_epochs": 1}
    space = nnfleet.search(SPACE, x, y, model=TEMPLATE, **kw)
    built = nnfleet.search(build_like_template, x, y, **kw)
    assert [m.parameters for m in built] == [m.parameters for m in space]
    assert len({m.parameters["lr"] for m in space}) == 6
    assert [m.parameters for m in space] != [m.parameters for m in nnfleet.search(
        SPACE, x, y, model=TEMPLATE, **{**kw, "sampler": "random"})]


def search_call(data, **change):
    x, y = data
    kw = dict(SPACE=SPACE, model=TEMPLATE, **SEARCH)
    kw.update(change)
    space = kw.pop("SPACE")
    if callable(space) and "model" not in change:
        kw["model"] = None
    return nnfleet.search(space, x, y, **kw)


@pytest.mark.parametrize("bad, words", [
    (dict(trials=0), "trials must be at least 1; expected an int from 1 to 100000, got int 0"),
    (dict(trials=None), "trials is required"),
    (dict(trials=2.5), "trials must be an integer"),
    (dict(scheduler="hyperbole"), "scheduler is not a known value; expected one of "
                                  "successive_halving, median_stopping, none"),
    (dict(mode="best"), "mode is not a known value; expected one of min, max, auto"),
    (dict(sampler="grid"), "sampler is not a known value; expected one of random, sobol"),
    (dict(reduction_factor=1), "reduction_factor must be at least 2"),
    (dict(min_epochs=4, max_epochs=3), r"max_epochs must be at least 4 \(min_epochs\); "
                                       r"expected an int from 4 to 2147483647, got int 3"),
    (dict(max_epochs=None), "max_epochs is required"),
    (dict(max_epochs=0, scheduler="none"), "max_epochs must be at least 1"),
    (dict(trials=-2**63), "trials must be at least 1; expected an int from 1 to 100000"),
    (dict(min_epochs=0), "min_epochs is out of range"),
    (dict(brackets=0), "brackets is out of range"),
    (dict(scheduler="median_stopping", interval=0), "interval is out of range"),
    (dict(max_total_epochs=0), "max_total_epochs is out of range"),
    (dict(time_limit=0), "time_limit must be positive"),
    (dict(metric=3), "metric must be a string"),
    (dict(epochs=3), "epochs is set by the scheduler in a search; expected max_epochs="),
    (dict(shuffel=True), "unknown keyword 'shuffel'"),
    (dict(SPACE=[1, 2]), "space_or_build must be a space dict or a build function"),
    (dict(model=None), "model is required with a space dict"),
    (dict(model=[]), "model must hold at least one template"),
    (dict(model=[TEMPLATE, 3]), r"model\[1\] must be a dict"),
    (dict(model={"name": "x"}), "model has no 'layers'"),
    (dict(SPACE=lambda t: [1]), r"build\(trial 0\) must return a model dict"),
    (dict(SPACE=lambda t: {"units": 3}), r"build\(trial 0\)'s model has no 'layers'"),
    (dict(SPACE=lambda t: TEMPLATE, model=TEMPLATE),
     "model is for a space dict, not a build function"),
    (dict(validation_data=([1], [1])), "validation_data"),
])
def test_search_names_the_argument_the_rule_and_what_was_expected(data, bad, words):
    with pytest.raises(nnfleet.UsageError, match=words) as e:
        search_call(data, **bad)
    assert "expected" in str(e.value) and len(str(e.value)) < 400


def test_build_errors_stop_the_search_before_anything_trains(data):
    calls = []

    def build(trial):
        calls.append(trial.number)
        if trial.number == 2:
            trial.uniform("lr", 0.0, 1.0)
            trial.uniform("lr", 0.0, 0.5)
        return build_like_template(trial)

    with pytest.raises(nnfleet.UsageError, match="trial 2: parameter 'lr' is drawn twice"):
        search_call(data, SPACE=build, model=None, on_epoch_end=lambda *a: calls.append(a))
    assert calls == [0, 1, 2]


def test_space_errors_are_the_plans_naming_the_field(data):
    # Named as the call's argument, not by the field of a plan the caller never saw.
    with pytest.raises(nnfleet.PlanError, match=r"space_or_build\['lr'\]\.loguniform: a log "
                                                r"range cannot pass through zero"):
        search_call(data, SPACE={**SPACE, "lr": {"loguniform": [0.0, 1.0]}})
