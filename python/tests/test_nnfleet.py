# The nnfleet Python module against the nnfleet CLI: same results and weights, same predictions,
# arrays read in place, Ctrl-C then resume, the error classes, flat memory, other threads.
import gc
import json
import os
import resource
import signal
import threading

import numpy as np
import pytest

import nnfleet
from conftest import FIT, MODELS, blobs, cli


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def write_plan(tmp_path, data):
    x, y = data
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    plan = {"seed": 5, "data": {"train": {"x": "x.npy", "y": "y.npy"}, "validation_split": 0.25},
            "defaults": FIT, "models": MODELS}
    (tmp_path / "plan.yaml").write_text(json.dumps(plan, indent=1))
    return tmp_path / "plan.yaml"


def test_train_equals_the_cli_bit_for_bit(tmp_path, data):
    plan = write_plan(tmp_path, data)
    cli("train", plan, "--out", tmp_path / "cli", "--workers", 2, "--quiet")
    results = json.loads((tmp_path / "cli" / "results.json").read_text())
    x, y = data
    run = nnfleet.train(MODELS, x, y, validation_split=0.25, seed=5, workers=1, progress=False,
                        **FIT)
    assert run.keys() == ["mlp", "cnn"]
    assert run.out == ""
    for want in results["models"]:
        got = run[want["name"]]
        assert got.status == "done"
        assert got.metrics == want["metrics"]
        assert len(got.history["loss"]) == 3
        assert got.history["val_accuracy"][-1] == want["metrics"]["val_accuracy"]
        saved = nnfleet.load_model(tmp_path / "cli" / "models" / (want["name"] + ".keras"))
        # Equal predictions, bit for bit, from both sets of weights.
        assert np.array_equal(got.model.predict(x), saved.predict(x))
        assert got.model.count_params() == saved.count_params()


def test_train_plan_runs_a_plan_file_as_the_cli_does(tmp_path, data):
    plan = write_plan(tmp_path, data)
    run = nnfleet.train_plan(plan, out=tmp_path / "py", workers=2, progress=False)
    cli("train", plan, "--out", tmp_path / "cli", "--workers", 1, "--quiet")
    results = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert [r.metrics for r in run] == [m["metrics"] for m in results["models"]]
    assert (tmp_path / "py" / "results.json").exists()


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("model")
    x, y = data
    run = nnfleet.train(MODELS[1:], x, y, progress=False, **FIT)
    run["cnn"].model.save(d / "cnn.keras")
    return d / "cnn.keras"


@pytest.mark.parametrize("workers", [1, 2])
def test_predict_equals_the_cli(tmp_path, data, saved_model, workers):
    x, y = data
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    cli("predict", saved_model, "--x", tmp_path / "x.npy", "--y", tmp_path / "y.npy",
        "--loss", "sparse_categorical_crossentropy", "--out", tmp_path / "p.npy",
        "--loss-out", tmp_path / "l.npy", "--workers", workers, "--batch", 10)
    pred, loss = nnfleet.predict(saved_model, x, y=y, loss="sparse_categorical_crossentropy",
                                 workers=workers, batch_size=7)
    assert pred.dtype == np.float32 and pred.shape == (96, 3)
    assert np.array_equal(pred, np.load(tmp_path / "p.npy"))
    assert np.array_equal(loss, np.load(tmp_path / "l.npy"))
    only = nnfleet.predict(saved_model, x)  # Keras's predict: the array alone
    assert isinstance(only, np.ndarray) and np.array_equal(only, pred)


def test_loaded_model_reports_like_keras(tmp_path, saved_model, data):
    m = nnfleet.load_model(saved_model)
    assert m.input_shape == (None, 8, 8, 1)
    assert m.output_shape == (None, 3)
    assert m.count_params() == 4 * 9 + 4 + 36 * 4 * 3 + 3
    lines = []
    text = m.summary(print_fn=lines.append)
    assert text == cli("inspect", saved_model).stdout
    m.save(tmp_path / "again.h5")
    x, y = data
    assert np.array_equal(nnfleet.load_model(tmp_path / "again.h5").predict(x), m.predict(x))
    ev = m.evaluate(x, y, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    _, loss = m.predict(x, y=y, loss="sparse_categorical_crossentropy")
    assert list(ev) == ["loss", "accuracy"]
    assert ev["loss"] == pytest.approx(float(loss.mean()))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = cli("evaluate", saved_model, "--x", tmp_path / "x.npy", "--y", tmp_path / "y.npy",
              "--loss", "sparse_categorical_crossentropy", "--metrics", "accuracy", "--json")
    assert ev == {k: v for k, v in json.loads(out.stdout).items() if k != "samples"}


def test_large_arrays_are_read_in_place():
    # 256 MB of inputs: a copy anywhere would raise the peak resident memory by as much again.
    x = np.ones((1 << 20, 64), dtype=np.float32)
    x[::3] = 0.5
    y = (np.arange(1 << 20) % 2).astype(np.int32)
    gc.collect()
    before = peak_mb()
    assert rss_mb() > 256
    run = nnfleet.train([{"name": "tiny", "layers": [{"Dense": {"units": 2,
                                                                "activation": "softmax"}}]}],
                        x, y, epochs=1, batch_size=8192, loss="sparse_categorical_crossentropy",
                        progress=False, workers=2)
    assert run["tiny"].status == "done"
    pred = run["tiny"].model.predict(x, batch_size=65536)
    assert pred.shape == (1 << 20, 2)
    # The predictions (8 MB) and the engine's own buffers; never a second 256 MB.
    assert peak_mb() - before < 100


def test_other_dtypes_are_converted_once_with_a_warning(data):
    x, y = data
    with pytest.warns(UserWarning, match="dtype float16"):
        run = nnfleet.train(MODELS[:1], x.astype(np.float16), y, progress=False, epochs=1,
                            loss="sparse_categorical_crossentropy")
    assert run["mlp"].status == "done"
    with pytest.warns(UserWarning, match="not C-contiguous"):
        nnfleet.predict(run["mlp"].model, np.asfortranarray(x[:, :, :, 0])[..., None])


def test_ctrl_c_stops_cleanly_and_resume_equals_an_uninterrupted_run(tmp_path, data):
    x, y = data
    whole = nnfleet.train(MODELS, x, y, seed=2, workers=1, progress=False, **FIT)

    def interrupt(name, epoch, logs):
        if epoch == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        nnfleet.train(MODELS, x, y, seed=2, workers=1, progress=False, out=tmp_path / "run",
                      checkpoint_seconds=0, on_epoch_end=interrupt, **FIT)
    assert (tmp_path / "run" / "checkpoints").is_dir()
    resumed = nnfleet.train(MODELS, x, y, seed=2, workers=1, progress=False,
                            out=tmp_path / "run", resume=True, **FIT)
    for a, b in zip(whole, resumed):
        assert b.status == "done"
        assert a.metrics == b.metrics
        assert a.history == b.history
        assert np.array_equal(a.model.predict(x), b.model.predict(x))


def test_on_epoch_end_runs_on_the_calling_thread(data, capsys):
    x, y = data
    calls = []
    nnfleet.train(MODELS, x, y, progress=True, on_epoch_end=lambda *a: calls.append(
        (threading.get_ident(), a[0], a[1], sorted(a[2]))), **FIT)
    assert {c[0] for c in calls} == {threading.get_ident()}
    assert sorted((c[1], c[2]) for c in calls) == [(m, e) for m in ("cnn", "mlp")
                                                   for e in (1, 2, 3)]
    assert calls[0][3] == ["accuracy", "loss"]
    out = capsys.readouterr().out
    # Outside a terminal: a bar and one line per finished model, with its epochs of planned.
    assert "mlp: done, 3/3 epochs" in out and "cnn: done, 3/3 epochs" in out
    assert "epoch 1" not in out


def test_errors_are_nnfleet_errors_with_the_cli_messages(tmp_path, data):
    x, y = data
    fit = dict(progress=False, epochs=1, loss="sparse_categorical_crossentropy")
    with pytest.raises(nnfleet.PlanError, match="unknown layer class 'Dense2'") as e:
        nnfleet.train([{"name": "m", "layers": [{"Dense2": {"units": 3}}]}], x, y, **fit)
    assert isinstance(e.value, nnfleet.Error)
    with pytest.raises(nnfleet.PlanError, match="Conv2D"):
        nnfleet.train(MODELS[1:], x.reshape(96, 64), y, **fit)
    bad = y.astype(np.float32)
    bad[4] = np.nan
    with pytest.raises(nnfleet.DataError, match=r"non-finite value \(NaN\) at row 4"):
        nnfleet.train(MODELS[:1], x, bad, **fit)
    with pytest.raises(nnfleet.DataError, match="disagree on the number of samples"):
        nnfleet.train(MODELS[:1], x, y[:50], **fit)
    with pytest.raises(nnfleet.DataError, match="unsupported dtype"):
        nnfleet.train(MODELS[:1], x.astype(np.complex64), y, **fit)
    with pytest.raises(nnfleet.UsageError, match="unknown keyword 'epoch'"):
        nnfleet.train(MODELS[:1], x, y, epoch=3)
    with pytest.raises(nnfleet.UsageError, match="workers"):
        nnfleet.train(MODELS[:1], x, y, workers=0, **fit)
    with pytest.raises(nnfleet.PlanError, match="optimizer"):
        nnfleet.train(MODELS[:1], x, y, optimizer="adamm", **fit)
    with pytest.raises(nnfleet.FileError, match="missing.keras"):
        nnfleet.load_model(tmp_path / "missing.keras")
    (tmp_path / "plan.yaml").write_text("models: [\n")
    plan_msg = cli("train", tmp_path / "plan.yaml", check=False).stderr.strip()
    with pytest.raises(nnfleet.PlanError) as e:
        nnfleet.train_plan(tmp_path / "plan.yaml", progress=False)
    assert "nnfleet: " + str(e.value) == plan_msg


def test_predict_errors(saved_model, data):
    x, y = data
    with pytest.raises(nnfleet.DataError, match="the samples of 'x' have shape"):
        nnfleet.predict(saved_model, x.reshape(96, 64))
    with pytest.raises(nnfleet.DataError, match="label 7 at sample 0"):
        nnfleet.predict(saved_model, x, y=np.full(96, 7, np.int32),
                        loss="sparse_categorical_crossentropy")
    with pytest.raises(nnfleet.UsageError, match="batch_size"):
        nnfleet.predict(saved_model, x, batch_size=0)


def test_memory_stays_flat_over_many_calls():
    x, y = blobs(32)
    model = [{"name": "m", "layers": [{"Flatten": {}}, {"Dense": {"units": 3,
                                                                  "activation": "softmax"}}]}]
    fit = dict(epochs=1, batch_size=16, loss="sparse_categorical_crossentropy", progress=False,
               workers=1)
    for _ in range(30):
        nnfleet.train(model, x, y, **fit)
    gc.collect()
    start = rss_mb()
    for _ in range(500):  # the count (Keras's clear_session() pain)
        run = nnfleet.train(model, x, y, **fit)
        run["m"].model.predict(x)
    gc.collect()
    assert rss_mb() - start < 10


def test_a_call_from_another_thread(data):
    x, y = data
    here = nnfleet.train(MODELS, x, y, progress=False, **FIT)
    out = {}

    def work():
        out["run"] = nnfleet.train(MODELS, x, y, progress=False, **FIT)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.metrics for r in out["run"]] == [r.metrics for r in here]


class KerasLike:
    """What nnfleet.train reads of a Keras model: to_json, get_weights and save(.keras)."""

    def __init__(self, name, model):
        self.name, self._model = name, model

    def to_json(self):
        raise AssertionError("the weights come with save(), the architecture too")

    def get_weights(self):
        return []

    def save(self, path):
        self._model.save(path)


def test_a_keras_model_object_trains_from_its_own_weights(tmp_path, data):
    x, y = data
    fit = dict(progress=False, epochs=1, batch_size=16, loss="sparse_categorical_crossentropy",
               metrics=["accuracy"], seed=4)
    first = nnfleet.train(MODELS[:1], x, y, **fit)["mlp"]
    first.model.save(tmp_path / "warm.keras")
    warm = nnfleet.train([KerasLike("warm", first.model)], x, y, **fit)["warm"]
    by_file = nnfleet.train([str(tmp_path / "warm.keras")], x, y, **fit)["warm"]
    assert warm.status == "done"
    assert warm.metrics == by_file.metrics
    # It continues from the trained weights: its first epoch beats the fresh model's.
    assert warm.history["loss"][0] < first.history["loss"][0]


def test_huge_batch_size_and_workers_are_capped_by_the_data_and_the_cores(data):
    # batch_size near 2^31 overflowed int (a crash) and sized memory by the batch; a million
    # workers aborted with std::system_error. Now: one batch of the data, one worker per core.
    x, y = data
    fit = dict(FIT, batch_size=len(x))
    want = nnfleet.train(MODELS[:1], x, y, seed=5, workers=1, progress=False, **fit)
    fit["batch_size"] = 2**31 - 1
    got = nnfleet.train(MODELS[:1], x, y, seed=5, workers=10**6, progress=False, **fit)
    assert got.workers == len(os.sched_getaffinity(0))
    assert got["mlp"].status == "done"
    assert got["mlp"].metrics == want["mlp"].metrics
