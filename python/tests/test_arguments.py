# The Python argument surface, swept: every keyword of train, predict, evaluate and load_model
# given hostile values (None, wrong types, nested lists, NaN and infinities, huge and negative
# ints, empty arrays, uint64 and object arrays, self-referencing and very deep dicts, very long
# strings). Each call works or raises one of nnfleet's error classes with a short message that
# names the keyword: never a crash, never a raw TypeError, ValueError, IndexError or
# RecursionError, never a dump of a whole plan or array.
import inspect
import math

import numpy as np
import pytest

import nnfleet
from conftest import blobs

MAX_MESSAGE = 1500  # characters: a message names values, it never dumps them


def self_referencing():
    d = {"name": "loop", "layers": []}
    d["layers"].append(d)
    return d


def deep(n=5000):
    d = {}
    for _ in range(n):
        d = {"a": d}
    return d


def nested(n=3000):
    v = [1.0]
    for _ in range(n):
        v = [v]
    return v


HOSTILE = {
    "None": None,
    "empty str": "",
    "long str": "x" * 100_000,
    "NUL str": "a\0b",
    "bytes": b"abc",
    "-1": -1,
    "0": 0,
    "2**31": 2**31,
    "2**64": 2**64,
    "-2**63": -(2**63),
    "1.5": 1.5,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "True": True,
    "nested list": [[1, [2, [3]]]],
    "deep list": nested(),
    "dict": {"a": 1},
    "self-referencing dict": self_referencing(),
    "deep dict": deep(),
    "empty array": np.zeros((0,), np.float32),
    "0-d array": np.float32(3.0),
    "uint64 array": np.full(8, 2**64 - 1, np.uint64),
    "object array": np.array([object(), 1], dtype=object),
    "float16 array": np.ones((4, 2), np.float16),
    "str array": np.array(["a", "b"]),
    "object": object(),
    "function": print,  # on_epoch_end may take it (and print the epochs)
    "empty tuple": (),
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("args")
    x, y = blobs(16)
    models = [{"name": "m", "layers": [{"Flatten": {}}, {"Dense": {"units": 3,
                                                                   "activation": "softmax"}}]}]
    run = nnfleet.train(models, x, y, epochs=1, batch_size=8, progress=False, workers=1,
                        loss="sparse_categorical_crossentropy")
    path = d / "m.keras"
    run["m"].model.save(path)
    return d, x, y, models, path


def calls(setup):
    """(function, the keywords that make a valid call, keywords it takes)."""
    d, x, y, models, path = setup
    train_kw = dict(models=models, x=x, y=y, epochs=1, batch_size=8, progress=False, workers=1,
                    loss="sparse_categorical_crossentropy")
    return [
        (nnfleet.train, train_kw),
        (nnfleet.predict, dict(model=str(path), x=x, y=y, loss="sparse_categorical_crossentropy",
                               workers=1)),
        (nnfleet.evaluate, dict(model=str(path), x=x, y=y, loss="sparse_categorical_crossentropy",
                                metrics=["accuracy"], workers=1)),
        (nnfleet.load_model, dict(path=str(path))),
        (nnfleet.search, dict(space_or_build={"u": {"int": [2, 4]}}, model=SEARCH_MODEL, x=x,
                              y=y, trials=2, max_epochs=1, scheduler="none", batch_size=8,
                              progress=False, workers=1, metric="loss",
                              loss="sparse_categorical_crossentropy")),
    ]


SEARCH_MODEL = {"layers": [{"Flatten": {}}, {"Dense": {"units": "{u}"}},
                          {"Dense": {"units": 3, "activation": "softmax"}}]}


def keywords(f):
    return [p.name for p in inspect.signature(f).parameters.values()
            if p.kind != inspect.Parameter.VAR_KEYWORD]


# What a message names for a keyword, when not the keyword itself.
ALSO = {"models": ("models[", "model '"), "model": ("model",), "path": ("path", "file"),
        "out": ("out", "output folder"), "space_or_build": ("space", "build")}


def check(f, kw, key, value, label, problems=None):
    args = dict(kw)
    args[key] = value
    if key == "out" and isinstance(value, str) and value and "\0" not in value:
        return  # a real folder name: a run that works, tested elsewhere
    try:
        f(**args)
    except nnfleet.Error as e:
        msg = str(e)
        names = (key,) + ALSO.get(key, ())
        if len(msg) >= MAX_MESSAGE:
            problems.append(f"{f.__name__}({key}={label}): {len(msg)} characters")
        elif not any(n in msg for n in names):
            problems.append(f"{f.__name__}({key}={label}): {msg[:300]}")
    except Exception as e:  # noqa: BLE001 (what the sweep exists to find)
        problems.append(f"{f.__name__}({key}={label}) raised {type(e).__name__}: {str(e)[:300]}")


def test_every_keyword_takes_hostile_values_with_a_clear_error(setup, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a run that works with out="..." writes here
    seen, problems = 0, []
    for f, kw in calls(setup):
        for key in keywords(f):
            for label, value in HOSTILE.items():
                check(f, kw, key, value, label, problems)
                seen += 1
    assert not problems, "\n".join(problems)
    assert seen > 4 * len(HOSTILE)


def test_plan_defaults_take_hostile_values_with_a_clear_error(setup):
    f, kw = calls(setup)[0]
    problems = []
    for key in ("shuffle", "batch_split", "early_stopping", "optimizer", "metrics"):
        for label, value in HOSTILE.items():
            check(f, kw, key, value, label, problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("bad, words", [
    (dict(test_data=(np.zeros((2, 8, 8, 1), np.float32),)), "test_data must be a pair"),
    (dict(test_data=5), "test_data must be a pair"),
    (dict(checkpoint_seconds="soon"), "checkpoint_seconds must be a number"),
    (dict(format=3), "format must be a string"),
    (dict(workers=2**70), "workers is out of range"),
    (dict(validation_split=1.0), "validation_split is out of range"),
    (dict(scale=math.nan), "scale is out of range"),
])
def test_train_names_the_keyword_and_the_rule(setup, bad, words):
    f, kw = calls(setup)[0]
    with pytest.raises(nnfleet.UsageError, match=words) as e:
        f(**{**kw, **bad})
    assert "expected" in str(e.value) and len(str(e.value)) < 300


def test_models_that_contain_themselves_or_nest_deeply_are_refused_by_name(setup):
    f, kw = calls(setup)[0]
    with pytest.raises(nnfleet.UsageError, match=r"models\[0\].*contains itself"):
        f(**{**kw, "models": [self_referencing()]})
    with pytest.raises(nnfleet.UsageError, match=r"models\[0\].*nested more than"):
        f(**{**kw, "models": [{"name": "d", "layers": [deep()]}]})


def test_load_model_checks_input_shape(setup):
    path = setup[4]
    with pytest.raises(nnfleet.UsageError, match="input_shape must be a non-empty tuple"):
        nnfleet.load_model(path, input_shape=())
    with pytest.raises(nnfleet.UsageError, match=r"input_shape\[1\] is out of range; expected "
                                                 r"an int from 1"):
        nnfleet.load_model(path, input_shape=(8, -8, 1))


def test_uint64_labels_beyond_int64_are_refused_not_wrapped(setup):
    _, x, y, models, _ = setup
    big = y.astype(np.uint64)
    big[3] = 2**64 - 1
    with pytest.raises(nnfleet.DataError, match="18446744073709551615 at flat index 3"):
        nnfleet.train(models, x, big, epochs=1, progress=False,
                      loss="sparse_categorical_crossentropy")


def test_messages_name_python_keywords_not_cli_flags(setup, tmp_path):
    _, x, y, models, _ = setup
    fit = dict(epochs=1, batch_size=8, progress=False, loss="sparse_categorical_crossentropy")
    nnfleet.train(models, x, y, out=tmp_path / "run", **fit)
    with pytest.raises(nnfleet.UsageError) as e:
        nnfleet.train(models, x, y, out=tmp_path / "run", **fit)
    assert "resume=True" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(nnfleet.UsageError) as e:
        nnfleet.train(models, x, y, out=tmp_path / "run", resume=True, **{**fit, "epochs": 2})
    assert "out=" in str(e.value) and "--out" not in str(e.value)


def test_save_keeps_the_files_its_policy_names(setup, tmp_path):
    """save="best N" keeps the N best models' files (the others' model is None), "none" none;
    every model keeps its results. A policy that is not one is refused naming save."""
    _, x, y, _, _ = setup
    models = [{"name": f"m{u}", "layers": [{"Flatten": {}}, {"Dense": {"units": u,
                                                                       "activation": "relu"}},
                                             {"Dense": {"units": 3, "activation": "softmax"}}]}
              for u in (1, 2, 4, 8)]
    kw = dict(epochs=1, batch_size=8, progress=False, workers=1, metrics=["accuracy"],
              loss="sparse_categorical_crossentropy")
    best = nnfleet.train(models, x, y, out=str(tmp_path / "best"), save="best 2", **kw)
    kept = [m.name for m in best if m.model_file is not None]
    assert len(kept) == 2
    assert sorted(p.name for p in (tmp_path / "best" / "models").iterdir()) == \
        sorted(n + ".keras" for n in kept)
    assert all(best[n].model is not None for n in kept)
    none = nnfleet.train(models, x, y, out=str(tmp_path / "none"), save="none", **kw)
    assert [m.model_file for m in none] == [None] * 4
    assert [m.metrics for m in none] == [m.metrics for m in best]
    for bad in ("best 0", "some", 3):
        with pytest.raises(nnfleet.Error, match="save"):
            nnfleet.train(models, x, y, save=bad, **kw)
