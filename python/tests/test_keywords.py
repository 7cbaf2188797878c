# The Keras keywords of train, search, predict and evaluate (issue 34): validation_data, every
# plan default as a keyword (class_weight, reduce_lr_on_plateau, sample_weight as an array),
# several inputs and outputs by name or in order, per-model data (data=), predict returning the
# array, errors in the words of the call (keywords and models[i], never plan lines) and the same
# label rules in train, predict and evaluate.
import json

import numpy as np
import pytest

import nnfleet
from nnfleet import _core
from conftest import FIT, MODELS, blobs

QUIET = dict(progress=False, workers=2)


def histories(run):
    return {m.name: m.history for m in run}


def test_validation_data_equals_validation_split_on_the_same_rows(data):
    x, y = data
    xv, yv = blobs(32, seed=9)
    split = nnfleet.train(MODELS, np.concatenate([x, xv]), np.concatenate([y, yv]),
                          validation_split=0.25, seed=4, **FIT, **QUIET)
    given = nnfleet.train(MODELS, x, y, validation_data=(xv, yv), seed=4, **FIT, **QUIET)
    assert "val_loss" in given["mlp"].history
    assert histories(given) == histories(split)


def test_validation_data_with_sample_weights_equals_the_weighted_split(data):
    x, y = data
    xv, yv = blobs(32, seed=9)
    wv = np.linspace(0.0, 2.0, 32).astype(np.float32)
    split = nnfleet.train(MODELS[:1], np.concatenate([x, xv]), np.concatenate([y, yv]),
                          sample_weight=np.concatenate([np.ones(96, np.float32), wv]),
                          validation_split=0.25, **FIT, **QUIET)
    given = nnfleet.train(MODELS[:1], x, y, validation_data=(xv, yv, wv), **FIT, **QUIET)
    assert histories(given) == histories(split)
    plain = nnfleet.train(MODELS[:1], x, y, validation_data=(xv, yv), **FIT, **QUIET)
    assert plain["mlp"].history["val_loss"] != given["mlp"].history["val_loss"]


def test_search_takes_validation_data_as_train_does(data):
    x, y = data
    xv, yv = blobs(32, seed=9)
    kw = dict(trials=3, max_epochs=2, min_epochs=1, model={
        "name": "t-{trial}", "layers": [{"Flatten": {}}, {"Dense": {"units": "{u}"}},
                                        {"Dense": {"units": 3, "activation": "softmax"}}]},
        batch_size=16, loss="sparse_categorical_crossentropy", seed=2, **QUIET)
    space = {"u": {"int": [2, 6]}}
    split = nnfleet.search(space, np.concatenate([x, xv]), np.concatenate([y, yv]),
                           validation_split=0.25, **kw)
    given = nnfleet.search(space, x, y, validation_data=(xv, yv), **kw)
    assert histories(given) == histories(split) and "val_loss" in given[0].history


def test_validation_data_and_validation_split_together_are_refused_as_keras_does(data):
    x, y = data
    for call in (lambda **kw: nnfleet.train(MODELS, x, y, **kw, **FIT, **QUIET),
                 lambda **kw: nnfleet.search({"u": {"int": [2, 4]}}, x, y, trials=2,
                                             max_epochs=1, model=MODELS[0], **kw, **QUIET)):
        with pytest.raises(nnfleet.UsageError, match="validation_split and validation_data both"):
            call(validation_split=0.2, validation_data=(x, y))
    with pytest.raises(nnfleet.UsageError, match=r"validation_data must be a pair or a triple; "
                                                 r"expected \(x, y\) or \(x, y, sample_weight\)"):
        nnfleet.train(MODELS, x, y, validation_data=(x,), **FIT, **QUIET)


def plan_run(tmp_path, data, defaults, sample_weight=None):
    """The same fleet as a plan file run by train_plan (the engine's own reading)."""
    x, y = data
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    train = {"x": "x.npy", "y": "y.npy"}
    if sample_weight is not None:
        np.save(tmp_path / "w.npy", sample_weight)
        train["sample_weight"] = "w.npy"
    plan = {"seed": 0, "data": {"train": train, "validation_split": 0.25},
            "defaults": dict(FIT, **defaults), "models": MODELS}
    (tmp_path / "plan.yaml").write_text(json.dumps(plan))
    return nnfleet.train_plan(tmp_path / "plan.yaml", out=tmp_path / "run", **QUIET)


def test_class_weight_with_int_keys_and_reduce_lr_are_the_plans(tmp_path, data):
    x, y = data
    lr = {"factor": 0.5, "patience": 0, "monitor": "loss"}
    run = nnfleet.train(MODELS, x, y, validation_split=0.25, class_weight={0: 1.0, 1: 3.0, 2: 0.5},
                        reduce_lr_on_plateau=lr, **FIT, **QUIET)
    plan = plan_run(tmp_path, data, {"class_weight": {"0": 1.0, "1": 3.0, "2": 0.5},
                                     "reduce_lr_on_plateau": lr})
    assert histories(run) == histories(plan)
    plain = nnfleet.train(MODELS, x, y, validation_split=0.25, **FIT, **QUIET)
    assert histories(plain) != histories(run)


def test_sample_weight_is_an_array_in_the_training_source(tmp_path, data):
    x, y = data
    w = np.where(y == 1, 4.0, 1.0).astype(np.float32)
    run = nnfleet.train(MODELS, x, y, sample_weight=w, validation_split=0.25, **FIT, **QUIET)
    assert histories(run) == histories(plan_run(tmp_path, data, {}, sample_weight=w))
    with pytest.raises(nnfleet.DataError, match="one weight per sample; expected 96 weights"):
        nnfleet.train(MODELS, x, y, sample_weight=w[:10], **FIT, **QUIET)


def test_every_plan_default_is_a_keyword_and_unknown_ones_get_a_near_miss(data):
    x, y = data
    keys = set(_core.plan_defaults_keys())
    assert {"class_weight", "reduce_lr_on_plateau", "epochs", "shuffle"} <= keys
    for key in sorted(keys - {"data", "keras", "layers"}):
        # A value no key takes: each is read by the plan (a PlanError naming the keyword), never
        # refused as an unknown keyword.
        with pytest.raises(nnfleet.PlanError) as e:
            nnfleet.train(MODELS[:1], x, y, **{key: {"no such": object.__name__}}, **QUIET)
        assert f"keyword {key}" in str(e.value) and "nnfleet.train:" not in str(e.value)
    with pytest.raises(nnfleet.UsageError) as e:
        nnfleet.train(MODELS, x, y, clas_weight={0: 1.0}, **QUIET)
    assert "unknown keyword 'clas_weight' (did you mean 'class_weight'?)" in str(e.value)
    assert "reduce_lr_on_plateau" in str(e.value) and "weighted_metrics" in str(e.value)
    with pytest.raises(nnfleet.UsageError, match=r"'validation_dat' \(did you mean "
                                                 r"'validation_data'\?\)"):
        nnfleet.train(MODELS, x, y, validation_dat=(x, y), **QUIET)
    with pytest.raises(nnfleet.UsageError, match="unknown keyword 'layers'"):
        nnfleet.train(MODELS, x, y, layers=[], **QUIET)  # the architecture is the models


# A Keras functional model (to_json() form) with inputs wide [3], deep [4] and outputs main [1],
# aux [1] (written as Keras 3 writes it).
def _tensor(shape, source):
    return {"class_name": "__keras_tensor__", "config": {
        "shape": [None, *shape], "dtype": "float32", "keras_history": [source, 0, 0]}}


def _layer(cls, name, config, inputs):
    return {"module": "keras.layers", "class_name": cls, "registered_name": None, "name": name,
            "config": dict(config, name=name, trainable=True, dtype="float32"),
            "inbound_nodes": [{"args": [inputs], "kwargs": {}}]}


def _input(name, width):
    return {"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
            "name": name, "inbound_nodes": [],
            "config": {"batch_shape": [None, width], "dtype": "float32", "name": name}}


def wide_deep(name="wd"):
    dense = {"activation": "linear", "use_bias": True}
    layers = [_input("wide", 3), _input("deep", 4),
              _layer("Dense", "hidden", dict(dense, units=3), _tensor([4], "deep")),
              _layer("Concatenate", "cat", {"axis": -1},
                     [_tensor([3], "wide"), _tensor([3], "hidden")]),
              _layer("Dense", "main", dict(dense, units=1), _tensor([6], "cat")),
              _layer("Dense", "aux", dict(dense, units=1), _tensor([3], "hidden"))]
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": name, "trainable": True, "layers": layers,
                       "input_layers": [["wide", 0, 0], ["deep", 0, 0]],
                       "output_layers": [["main", 0, 0], ["aux", 0, 0]]}}


@pytest.fixture(scope="module")
def wd_data():
    r = np.random.default_rng(1)
    wide, deep = r.random((64, 3), dtype=np.float32), r.random((64, 4), dtype=np.float32)
    return wide, deep, wide.sum(1, keepdims=True), deep.sum(1, keepdims=True)


WD_FIT = dict(epochs=2, batch_size=16, loss="mse", metrics=["mae"], **QUIET)


def test_several_inputs_and_outputs_by_name_or_in_order(wd_data):
    wide, deep, main, aux = wd_data
    by_name = nnfleet.train([wide_deep()], {"deep": deep, "wide": wide},
                            {"aux": aux, "main": main},
                            validation_data=({"wide": wide[:8], "deep": deep[:8]},
                                             [main[:8], aux[:8]]), **WD_FIT)
    in_order = nnfleet.train([wide_deep()], [wide, deep], [main, aux],
                             validation_data=([wide[:8], deep[:8]], [main[:8], aux[:8]]),
                             **WD_FIT)
    assert by_name["wd"].status == "done", by_name["wd"].message
    assert "val_aux_loss" in by_name["wd"].history
    assert histories(by_name) == histories(in_order)
    model = in_order["wd"].model
    preds = model.predict({"deep": deep, "wide": wide})
    assert isinstance(preds, list) and [p.shape for p in preds] == [(64, 1), (64, 1)]
    again = nnfleet.predict(model, [wide, deep])
    assert all(np.array_equal(a, b) for a, b in zip(preds, again))
    preds2, losses = model.predict([wide, deep], y={"main": main, "aux": aux}, loss="mse")
    assert all(np.array_equal(a, b) for a, b in zip(preds, preds2))
    assert [v.shape for v in losses] == [(64,), (64,)]
    scores = model.evaluate({"wide": wide, "deep": deep}, [main, aux], loss="mse")
    assert scores == model.evaluate([wide, deep], {"aux": aux, "main": main}, loss="mse")


def test_a_dict_of_inputs_names_a_wrong_or_missing_key(wd_data):
    wide, deep, main, aux = wd_data
    with pytest.raises(nnfleet.UsageError, match=r"x has a key that names no input or output "
                                                 r"\(did you mean 'deep'\?\); expected keys "
                                                 r"among 'wide', 'deep'"):
        nnfleet.train([wide_deep()], {"wide": wide, "deeep": deep}, [main, aux], **WD_FIT)
    with pytest.raises(nnfleet.UsageError, match="y gives no array for 'aux'"):
        nnfleet.train([wide_deep()], [wide, deep], {"main": main}, **WD_FIT)
    with pytest.raises(nnfleet.UsageError, match="the model does not name its inputs"):
        nnfleet.train(MODELS, {"x": wide}, main, **WD_FIT)
    model = nnfleet.train([wide_deep()], [wide, deep], [main, aux], **WD_FIT)["wd"].model
    with pytest.raises(nnfleet.UsageError, match=r"x has a key that names no input"):
        model.predict({"wide": wide, "dep": deep})


def test_a_ragged_nested_list_is_a_data_error_naming_the_keyword(data):
    x, y = data
    for kw, words in ((dict(x=[[1.0, 2.0], [3.0]], y=[0, 1]), "failed to read x: NumPy cannot"),
                      (dict(x=x, y=y, validation_data=([[1.0], [2.0, 3.0]], [0, 1])),
                       "failed to read validation_data's x: NumPy cannot"),
                      (dict(data={"a": ([[1.0], [2.0, 3.0]], [0, 1])}),
                       r"failed to read data\['a'\]'s x: NumPy cannot")):
        with pytest.raises(nnfleet.DataError, match=words):
            nnfleet.train(MODELS, **kw, **FIT, **QUIET)
    with pytest.warns(UserWarning, match="x has a list; converted once"):
        run = nnfleet.train(MODELS[:1], [[0.0, 1.0]] * 8, [0, 1] * 4, **FIT, **QUIET)
    assert run["mlp"].status == "done"  # a nested list of numbers: one array


SERIES_MODELS = [
    {"name": "lstm-{series}", "layers": [{"LSTM": {"units": 4}}, {"Dense": {"units": 1}}]},
    {"name": "mlp", "layers": [{"Flatten": {}}, {"Dense": {"units": 1}}]},
]


def series(k):
    x = np.random.default_rng(k).random((40, 5, 1), dtype=np.float32)
    return x, x.sum(1)


def test_per_model_data_expands_every_model_over_the_keys():
    xv, yv = series(9)
    s1 = series(1)
    run = nnfleet.train(SERIES_MODELS, data={"s00": series(0),
                                             "s01": {"x": s1[0], "y": s1[1],
                                                     "validation_data": (xv, yv)}},
                        epochs=2, loss="mse", seed=3, **QUIET)
    assert run.keys() == ["lstm-s00", "lstm-s01", "mlp-s00", "mlp-s01"]
    assert run["mlp-s01"].parameters == {"series": "s01"}
    assert "val_loss" in run["lstm-s01"].history and "val_loss" not in run["lstm-s00"].history
    # Each model is what a train on its key's data alone gives.
    alone = nnfleet.train([dict(SERIES_MODELS[0], name="lstm-s01")], s1[0], s1[1],
                          validation_data=(xv, yv), epochs=2, loss="mse", seed=3, **QUIET)
    assert run["lstm-s01"].history == alone["lstm-s01"].history
    renamed = nnfleet.train(SERIES_MODELS[1:], data={3: series(3)}, data_key="k", epochs=1,
                            loss="mse", **QUIET)
    assert renamed.keys() == ["mlp-3"] and renamed["mlp-3"].parameters == {"k": 3}


def test_per_model_data_refuses_x_too_and_bad_entries(data):
    x, y = data
    with pytest.raises(nnfleet.UsageError, match="data= gives each model its own arrays"):
        nnfleet.train(MODELS, x, y, data={"a": (x, y)}, **QUIET)
    with pytest.raises(nnfleet.UsageError, match=r"data\['a'\] must be a pair or a triple"):
        nnfleet.train(MODELS, data={"a": x}, **QUIET)
    with pytest.raises(nnfleet.UsageError, match=r"data\['a'\] has an unknown key 'valdation_data' "
                                                 r"\(did you mean 'validation_data'\?\)"):
        nnfleet.train(MODELS, data={"a": {"x": x, "y": y, "valdation_data": (x, y)}}, **QUIET)
    with pytest.raises(nnfleet.UsageError, match="data has two keys of the same name"):
        nnfleet.train(MODELS, data={3: (x, y), "3": (x, y)}, **QUIET)
    with pytest.raises(nnfleet.UsageError, match="data has a key that is not a plain name"):
        nnfleet.train(MODELS, data={"a{b}": (x, y)}, **QUIET)


def test_predict_returns_the_array_and_the_loss_one_keyword_away(data):
    x, y = data
    model = nnfleet.train(MODELS[:1], x, y, **FIT, **QUIET)["mlp"].model
    pred = model.predict(x)
    assert isinstance(pred, np.ndarray) and pred.shape == (96, 3)
    pred2, loss = model.predict(x, y=y)
    assert np.array_equal(pred, pred2) and loss.shape == (96,)
    assert np.array_equal(nnfleet.predict(model, x), pred)


def test_plan_errors_name_the_keyword_and_the_model_not_plan_lines(data):
    x, y = data
    bad_layer = [MODELS[0], {"name": "odd", "layers": [{"Flatten": {}},
                                                       {"Dense": {"units": 0}}]}]
    cases = [
        (dict(models=bad_layer), "models[1] ('odd') layers[1].Dense.units: expected a positive"),
        (dict(epochs=-1), "keyword epochs: expected a positive integer, got -1"),
        (dict(loss="crossentropi"), 'keyword loss: unknown loss "crossentropi"'),
        (dict(loss="categorical_crossentropy"),
         "models[0] ('mlp'): targets do not match the model output"),
    ]
    for change, words in cases:
        kw = dict(FIT, models=MODELS[:1], **QUIET)
        kw.update(change)
        with pytest.raises(nnfleet.PlanError) as e:
            nnfleet.train(kw.pop("models"), x, y, **kw)
        assert words in str(e.value)
        assert "nnfleet.train" not in str(e.value) and str(e.value).startswith("failed to train")
    with pytest.raises(nnfleet.PlanError) as e:
        nnfleet.train(MODELS[:1], x, y, **dict(FIT, loss="categorical_crossentropy"), **QUIET)
    assert "(training data x and y)" in str(e.value)


def test_int_labels_with_categorical_crossentropy_one_rule_in_train_predict_evaluate(data):
    x, y = data
    fit = dict(FIT, loss="categorical_crossentropy")
    with pytest.raises(nnfleet.Error) as trained:
        nnfleet.train(MODELS[:1], x, y, **fit, **QUIET)
    model = nnfleet.train(MODELS[:1], x, y, **FIT, **QUIET)["mlp"].model
    for call in (lambda: model.predict(x, y=y, loss="categorical_crossentropy"),
                 lambda: nnfleet.evaluate(model, x, y, loss="categorical_crossentropy")):
        with pytest.raises(nnfleet.Error) as e:
            call()
        # train reports it with the plan's other problems (a PlanError, all listed at once),
        # predict and evaluate as a DataError: one rule (target_shape_problem), one sentence.
        assert isinstance(e.value, nnfleet.DataError)
        assert isinstance(trained.value, nnfleet.PlanError)
        for rule in ("targets do not match the model output", "integer class labels",
                     "sparse_categorical_crossentropy"):
            assert rule in str(trained.value) and rule in str(e.value)
