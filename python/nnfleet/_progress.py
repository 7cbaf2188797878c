"""What train and search print as they run (`verbose=`, as Keras's fit): one bar for the whole
fleet and one line per finished model, where the engine's live table cannot be drawn."""

from __future__ import annotations

import html
import math
import sys
import time

# A plain log (a file, a pipe) gets a bar line each time this fraction of the planned epochs
# more is done: at most 11 bar lines for any fleet (6,000 per-epoch lines for 2,000 models of 3
# epochs was the old output).
LOG_STEP = 0.10
# In-place updates (Jupyter, a tty-like stream) at most this often: redrawing a Jupyter output
# costs about 1 ms of the kernel's, and 4,000 epochs end within seconds in a tiny fleet.
REDRAW_SECONDS = 0.2
BAR_WIDTH = 20


def _duration(s):
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def _kernel():
    """IPython's display functions when a Jupyter kernel runs this code, else None."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        try:
            import IPython as ipython
        except ImportError:
            return None
    shell = getattr(ipython, "get_ipython", lambda: None)()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None  # a terminal IPython draws \r like any tty
    from IPython import display
    return display


def _tty_like(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Bar:
    """The bar as Jupyter shows it: text/plain, and text/html with a <progress> element."""

    def __init__(self, text, fraction):
        self.text, self.fraction = text, fraction

    def __repr__(self):
        return self.text

    def _repr_html_(self):
        return (f'<div><progress value="{self.fraction:.4f}" max="1" style="width:12em">'
                f'</progress> <code>{html.escape(self.text)}</code></div>')


class FleetProgress:
    """One bar over the fleet (models done/total, epochs done/total, elapsed, estimated rest)
    and one line per finished model, fed the run's events on the calling thread.

    verbose 1: the bar (in Jupyter a display updated in place, on a tty-like stream a line
    rewritten with \\r, in a plain log a line per LOG_STEP of the epochs) and the model lines;
    verbose 2: the model lines only. The run's "start" event gives the models it trains and
    their planned epochs (the engine's Event::kRunStart), so a grid's totals are its own.
    """

    def __init__(self, verbose, stream=None):
        self.stream = stream if stream is not None else sys.stdout
        self.bar = verbose == 1
        self.planned = {}
        self.models = 0
        self.epochs = 0
        self.started = False
        self.models_done = 0
        self.epochs_done = 0
        self.start = time.monotonic()
        self.display = _kernel() if self.bar else None
        self.mode = "jupyter" if self.display else "tty" if _tty_like(self.stream) else "log"
        self.handle = None
        self.drawn = 0.0     # when the bar was last drawn in place
        self.logged = -1     # the last LOG_STEP reached in a log
        self.logged_models = -1  # the models done its last bar line showed
        self.on_line = False  # a \r bar is on the stream's current line

    def text(self):
        elapsed = time.monotonic() - self.start
        done = self.epochs_done / self.epochs if self.epochs else 0.0
        rest = elapsed * (1 - done) / done if done > 0 else math.inf
        filled = int(BAR_WIDTH * min(done, 1.0))
        return (f"[{'=' * filled}{'.' * (BAR_WIDTH - filled)}] {self.models_done}/{self.models} "
                f"models, {self.epochs_done}/{self.epochs} epochs, {_duration(elapsed)} elapsed, "
                f"{'done' if self.models_done == self.models else _duration(rest) + ' left'}")

    def _draw(self, force=False):
        fraction = self.epochs_done / self.epochs if self.epochs else 1.0
        if self.mode == "log":
            step = int(fraction / LOG_STEP + 1e-9)
            if step > self.logged or force:
                self.logged, self.logged_models = step, self.models_done
                print(self.text(), file=self.stream, flush=True)
            return
        now = time.monotonic()
        if not force and now - self.drawn < REDRAW_SECONDS:
            return
        self.drawn = now
        if self.mode == "jupyter":
            bar = _Bar(self.text(), fraction)
            if self.handle is None:
                self.handle = self.display.display(bar, display_id=True)
            else:
                self.handle.update(bar)
        else:
            self.stream.write("\r" + self.text() + "\x1b[K")
            self.stream.flush()
            self.on_line = True

    def _line(self, text):
        if self.on_line:  # the bar's line is cleared, the model's line written, the bar redrawn
            self.stream.write("\r\x1b[K")
            self.on_line = False
        print(text, file=self.stream, flush=True)

    def event(self, kind, name, epoch, logs, seconds, status):
        if kind == "start":  # logs: [(name, planned epochs)] of the models this run trains
            self.planned = dict(logs)
            self.models = len(logs)
            self.epochs = sum(e for _, e in logs)
            self.started = True
            self.start = time.monotonic()
            if self.bar:
                self._draw(force=True)
            return
        if kind == "epoch":
            self.epochs_done += 1
        else:
            self.models_done += 1
            # A model that ended early (early stopping, pruned, failed) will train no more: the
            # total is what the fleet still trains, so that the estimate holds.
            self.epochs -= max(0, self.planned.get(name, epoch) - epoch)
            shown = " - ".join(f"{k} {v:.4g}" for k, v in logs.items())
            total = self.planned.get(name)
            self._line(f"{name}: {status}, {epoch}{'/' + str(total) if total else ''} epochs, "
                       f"{seconds:.1f}s" + (f" - {shown}" if shown else ""))
        if self.bar:
            self._draw(force=kind == "model" and self.mode == "tty")

    def finish(self):
        """The bar's last state, drawn whatever the throttle (models never started because of
        a stop are left out of the count; nothing when the run never started)."""
        if not self.bar or not self.started:
            return
        if self.mode == "log":
            if self.logged_models != self.models_done:
                self._draw(force=True)
            return
        self._draw(force=True)
        if self.mode == "tty" and self.on_line:
            self.stream.write("\n")
            self.stream.flush()
            self.on_line = False
