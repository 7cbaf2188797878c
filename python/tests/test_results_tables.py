# A Run's results as tables (rows, frame, history_frame, the HTML leaderboard), its own folder
# without out= (models read when asked for, removed with the Run) and its report.
import gc
import os
import sys

import pytest

import nnfleet
from conftest import blobs

FIT = dict(epochs=2, batch_size=16, loss="sparse_categorical_crossentropy", metrics=["accuracy"],
           optimizer={"Adam": {"learning_rate": 0.01}}, verbose=0, workers=2, seed=4)


def dense(name, units, **extra):
    return {"name": name, "layers": [{"Flatten": {}},
                                     {"Dense": {"units": units, "activation": "relu"}},
                                     {"Dense": {"units": 3, "activation": "softmax"}}], **extra}


# Two series of two widths: grid variables recorded as parameters, and a group per series.
GRID = [{"name": "s{series}-w{width}", "grid": {"series": ["a", "b"], "width": [2, 8]},
         "layers": [{"Flatten": {}}, {"Dense": {"units": "{width}", "activation": "relu"}},
                    {"Dense": {"units": 3, "activation": "softmax"}}]}]


@pytest.fixture(scope="module")
def xy():
    return blobs(64, seed=8)


@pytest.fixture(scope="module")
def grid_run(xy):
    return nnfleet.train(GRID, *xy, validation_split=0.25, **FIT)


def test_without_out_the_run_owns_a_folder_removed_with_it(xy):
    run = nnfleet.train([dense("m", 4)], *xy, **FIT)
    assert run.out == ""
    top = os.path.dirname(run.folder)
    assert os.path.basename(top).startswith("nnfleet-run-")
    assert os.path.isfile(os.path.join(run.folder, "results.json"))
    m = run["m"]
    assert m.model_file.startswith(run.folder) and os.path.isfile(m.model_file)
    assert m._model is None  # not read until asked for
    assert m.model.count_params() == m.params
    del run
    gc.collect()
    assert os.path.isdir(top)  # a result kept keeps the folder its model file is in
    del m
    gc.collect()
    assert not os.path.exists(top)


def test_resume_without_out_is_refused_by_name(xy):
    with pytest.raises(nnfleet.UsageError, match="resume needs the output folder.*out=FOLDER"):
        nnfleet.train([dense("m", 4)], *xy, resume=True, **FIT)


def test_frame_has_a_row_per_model_with_metrics_parameters_and_rank(grid_run):
    frame = grid_run.frame()
    assert list(frame["name"]) == ["sa-w2", "sa-w8", "sb-w2", "sb-w8"]
    assert list(frame.columns) == ["name", "status", "epochs", "best_epoch", "loss", "accuracy",
                                   "val_loss", "val_accuracy", "series", "width", "params",
                                   "seconds", "rank"]
    assert list(frame["series"]) == ["a", "a", "b", "b"]
    assert list(frame["width"]) == [2, 8, 2, 8]
    assert sorted(frame["rank"]) == [1, 2, 3, 4]
    best = grid_run.results[grid_run.ranking[0]].name
    assert frame.loc[frame["rank"] == 1, "name"].item() == best
    # The leaderboard's metric: the validation accuracy (the plan's first metric), higher best.
    assert grid_run.rank_by == "val_accuracy" and grid_run.higher_is_better
    for row in frame.itertuples():
        assert row.val_accuracy == grid_run[row.name].metrics["val_accuracy"]
        assert row.params == grid_run[row.name].params
    assert frame.to_dict("records") == grid_run.rows()


def test_group_by_ranks_within_each_group(grid_run, xy):
    frame = grid_run.frame(group_by="series")
    for series in ("a", "b"):
        group = frame[frame["series"] == series]
        assert sorted(group["rank"]) == [1, 2]
        best = group.loc[group["rank"] == 1, "val_accuracy"].item()
        assert best == group["val_accuracy"].max()
    with pytest.raises(nnfleet.UsageError, match="group_by must name a parameter.*series, width"):
        grid_run.frame(group_by="serie")
    # train's group_by= is the Run's default for frame().
    run = nnfleet.train(GRID, *xy, validation_split=0.25, group_by="width", **FIT)
    assert run.group_by == "width"
    assert sorted(run.frame()["rank"]) == [1, 1, 2, 2]
    with pytest.raises(nnfleet.UsageError, match="group_by must be a string"):
        nnfleet.train(GRID, *xy, group_by=3, **FIT)


def test_history_frame_is_long_with_every_history_column(grid_run):
    h = grid_run.history_frame()
    assert len(h) == 4 * 2
    assert list(h.columns) == ["model", "epoch", "loss", "accuracy", "val_loss", "val_accuracy",
                               "seconds"]
    assert list(h["epoch"][:2]) == [1, 2]
    sb = h[h["model"] == "sb-w8"]
    assert list(sb["val_loss"]) == grid_run["sb-w8"].history["val_loss"]


def test_without_pandas_the_tables_name_pandas_and_the_plain_forms(grid_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(nnfleet.UsageError, match=r"pandas is not importable.*python3-pandas.*"
                                                 r"run\.rows\(\) or run\.results"):
        grid_run.frame()
    with pytest.raises(nnfleet.UsageError, match=r"python3-pandas.*history_rows\(\)"):
        grid_run.history_frame()
    assert len(grid_run.rows()) == 4 and len(grid_run.history_rows()) == 8
    assert "<table>" in grid_run._repr_html_()  # the leaderboard needs no pandas


def test_the_html_leaderboard_is_escaped_and_cut_at_20_rows(xy):
    run = nnfleet.train([dense(f"m{k:02d}", 2) for k in range(23)], *xy, epochs=1,
                        **{k: v for k, v in FIT.items() if k != "epochs"})
    page = run._repr_html_()
    assert page.count("<tr>") == 1 + 20 + 1  # the head, 20 models, "... 3 more"
    assert "... 3 more" in page
    best = run.results[run.ranking[0]].name
    assert f"<tr><td>1</td><td>{best}</td><td>done</td>" in page
    run.results[run.ranking[0]].name = "<b>&"
    assert "&lt;b&gt;&amp;" in run._repr_html_() and "<b>&" not in run._repr_html_()


def test_report_from_python_with_and_without_out(grid_run, xy, tmp_path):
    written = grid_run.report()
    assert written == os.path.join(grid_run.folder, "report.html")
    page = open(written).read()
    assert "<html" in page.lower() and "sb-w8" in page
    copy = grid_run.report(tmp_path / "grid.html")  # written again (its time), then copied
    assert copy == str(tmp_path / "grid.html") and open(copy).read() == open(written).read()
    assert grid_run.report(tmp_path) == str(tmp_path / "report.html")
    run = nnfleet.train([dense("m", 4)], *xy, out=tmp_path / "kept", report=True, **FIT)
    assert run.out == run.folder == str(tmp_path / "kept")
    assert run.report_path == str(tmp_path / "kept" / "report.html") and not run.report_error
    assert os.path.isfile(run.report_path)
    assert run.report() == run.report_path
    with pytest.raises(nnfleet.UsageError, match="report must be True or False"):
        nnfleet.train([dense("m", 4)], *xy, report="yes", **FIT)


def test_a_search_run_keeps_its_trials_frame_and_gains_frame(xy):
    run = nnfleet.search({"width": {"choice": [2, 4]}}, *xy, trials=3, max_epochs=2,
                         scheduler="none", validation_split=0.25, model=dense("t-{trial}",
                                                                             "{width}"),
                         **{k: v for k, v in FIT.items() if k != "epochs"})
    trials = run.trials_frame()
    assert list(trials["trial"]) == [0, 1, 2]
    frame = run.frame()
    assert list(frame["width"]) == list(trials["width"])
    assert sorted(frame["rank"]) == [1, 2, 3]
