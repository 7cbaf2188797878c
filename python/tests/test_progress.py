# verbose= as Keras's fit: outside a terminal one bar for the fleet and one line per finished
# model (in a log, in Jupyter, on a tty-like stream), never a line per epoch of every model.
import io
import re
import sys
import types

import pytest

import nnfleet
from conftest import blobs

FIT = dict(batch_size=16, loss="sparse_categorical_crossentropy", metrics=["accuracy"],
           workers=2, seed=4)
# A grid whose models train 1 or 3 epochs: 2 x 2 models, 8 epochs planned.
GRID = [{"name": "w{width}-e{epochs}", "grid": {"width": [2, 4], "epochs": [1, 3]},
         "epochs": "{epochs}",
         "layers": [{"Flatten": {}}, {"Dense": {"units": "{width}", "activation": "relu"}},
                    {"Dense": {"units": 3, "activation": "softmax"}}]}]
MODEL_LINE = re.compile(r"^(w\d-e\d): done, (\d)/(\d) epochs, [\d.]+s - loss \S+ - accuracy \S+$")
BAR = re.compile(r"^\[[=.]{20}\] (\d+)/4 models, (\d+)/8 epochs, \d+:\d\d elapsed, ")


@pytest.fixture(scope="module")
def xy():
    return blobs(48, seed=9)


def model_lines(text):
    return [MODEL_LINE.match(l) for l in text.splitlines() if MODEL_LINE.match(l)]


def test_verbose_2_prints_one_line_per_finished_model_with_its_planned_epochs(xy, capsys):
    nnfleet.train(GRID, *xy, verbose=2, **FIT)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 4
    done = sorted((m[1], m[2], m[3]) for m in model_lines(out))
    assert done == [("w2-e1", "1", "1"), ("w2-e3", "3", "3"), ("w4-e1", "1", "1"),
                    ("w4-e3", "3", "3")]


def test_verbose_1_in_a_log_prints_a_bounded_bar_and_the_model_lines(xy, capsys):
    nnfleet.train(GRID, *xy, verbose=1, **FIT)
    lines = capsys.readouterr().out.splitlines()
    bars = [BAR.match(l) for l in lines if BAR.match(l)]
    assert len(model_lines("\n".join(lines))) == 4
    assert len(bars) + 4 == len(lines)
    # A line at the start, one per 10% of the epochs at most, and the last state.
    assert 2 <= len(bars) <= 1 + 10 + 1
    assert (bars[0][1], bars[0][2]) == ("0", "0")
    assert (bars[-1][1], bars[-1][2]) == ("4", "8") and lines[-1].endswith("done")
    assert all("\r" not in l for l in lines)


def test_a_tty_like_stream_gets_the_bar_rewritten_in_place(xy, monkeypatch):
    class Console(io.StringIO):
        def isatty(self):
            return True
    console = Console()
    monkeypatch.setattr(sys, "stdout", console)  # not sys.__stdout__: no live table
    nnfleet.train(GRID, *xy, **FIT)  # verbose="auto": 1
    text = console.getvalue()
    assert text.endswith("\n") and "\r" in text
    lines = text.split("\n")[:-1]
    # Each model line replaces the bar on its line ("\r" + clear), then the bar is redrawn.
    finished = [l.rsplit("\r\x1b[K", 1)[-1] for l in lines]
    assert len(model_lines("\n".join(finished))) == 4
    assert BAR.match(finished[-1].rsplit("\r", 1)[-1].replace("\x1b[K", ""))
    assert "4/4 models, 8/8 epochs" in lines[-1]


def test_jupyter_gets_one_display_updated_in_place(xy, monkeypatch, capsys):
    shown = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj))

    def display(obj, display_id=None):
        assert display_id is True
        shown.append(("display", obj))
        return Handle()
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    ipython.display = types.ModuleType("IPython.display")
    ipython.display.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython.display)
    nnfleet.train(GRID, *xy, verbose=1, **FIT)
    out = capsys.readouterr().out
    assert len(model_lines(out)) == 4 and len(out.splitlines()) == 4  # no bar in the text
    assert [k for k, _ in shown[:1]] == ["display"]
    assert all(k == "update" for k, _ in shown[1:])
    last = shown[-1][1]
    assert "4/4 models, 8/8 epochs" in repr(last)
    assert '<progress value="1.0000"' in last._repr_html_()


def test_progress_is_an_alias_of_verbose(xy, capsys):
    nnfleet.train(GRID, *xy, progress=False, **FIT)
    nnfleet.train(GRID, *xy, verbose=0, **FIT)
    assert capsys.readouterr().out == ""
    nnfleet.train(GRID, *xy, progress=True, **FIT)
    assert len(model_lines(capsys.readouterr().out)) == 4
    with pytest.raises(nnfleet.UsageError, match="progress is an alias of verbose; give one"):
        nnfleet.train(GRID, *xy, verbose=2, progress=True, **FIT)
    with pytest.raises(nnfleet.UsageError, match="verbose must be 0, 1 or 2"):
        nnfleet.train(GRID, *xy, verbose=3, **FIT)
    with pytest.raises(nnfleet.UsageError, match="progress must be True, False or 'json'"):
        nnfleet.train(GRID, *xy, progress="yes", **FIT)


def test_a_search_shows_its_pruned_trials_as_finished(xy, capsys):
    run = nnfleet.search({"width": {"choice": [2, 4]}}, *xy, trials=6, max_epochs=3,
                         min_epochs=1, reduction_factor=3, verbose=2, metric="loss",
                         model={"name": "t-{trial}", "layers": GRID[0]["layers"]},
                         **{k: v for k, v in FIT.items() if k != "seed"})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    statuses = sorted(l.split(":")[1].split(",")[0].strip() for l in lines)
    assert statuses == sorted(m.status for m in run)
    assert statuses.count("pruned") == 4
    assert all(re.search(r", [13]/3 epochs", l) for l in lines)
