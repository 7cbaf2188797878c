# Runs against other threads and the interpreter's exit: two threads starting runs into one
# output folder, arrays changed while a run reads them, the interpreter exiting (or Ctrl-C)
# while a train runs on another thread. Every order of events is forced (a barrier at the
# folder's creation, a hold at an epoch's end, a run that cannot end by itself), never waited for.
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import nnfleet
from nnfleet import _core
from conftest import blobs

TINY = [{"name": "m", "layers": [{"Flatten": {}}, {"Dense": {"units": 3,
                                                             "activation": "softmax"}}]}]
FIT = dict(epochs=2, batch_size=8, loss="sparse_categorical_crossentropy", progress=False,
           workers=1)


def test_two_threads_starting_runs_into_one_folder_one_wins(tmp_path):
    # Both runs build their folders completely and meet at the barrier before either renames:
    # with a temporary folder per process (not per run) the two would share, and both fail.
    x, y = blobs(16)
    out = tmp_path / "run"
    for trial in range(3):
        target = out.with_name(f"run{trial}")
        _core._test_folder_barrier(2)
        results = [None, None]

        def work(i):
            try:
                results[i] = nnfleet.train(TINY, x, y, out=target, **FIT)
            except Exception as e:  # noqa: BLE001 (the test inspects what it is)
                results[i] = e

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _core._test_folder_barrier(0)
        runs = [r for r in results if isinstance(r, nnfleet.Run)]
        errors = [r for r in results if not isinstance(r, nnfleet.Run)]
        assert len(runs) == 1 and len(errors) == 1, results
        assert runs[0]["m"].status == "done"
        assert isinstance(errors[0], nnfleet.UsageError), repr(errors[0])
        msg = str(errors[0])
        assert "it already exists" in msg and "resume=True" in msg and "--" not in msg, msg
        # Nothing of the losing run is left beside the folder.
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(target.name)) == \
            [target.name]


def test_a_label_changed_during_the_run_fails_that_model_with_a_sentence():
    x, y = blobs(32)
    y = y.copy()

    def change(name, epoch, logs):
        if epoch == 1:  # the worker waits here until this returns (the test hook)
            y[5] = 7

    run = nnfleet.train(TINY, x, y, on_epoch_end=change, _hold_at_epoch_end=True, **FIT)
    m = run["m"]
    assert m.status == "failed"
    assert m.epochs == 1
    assert "sample 5 of the training data holds label 7" in m.message
    assert "0..2" in m.message and "changed while the run read it" in m.message
    assert run.exit_code == 3


def test_an_id_changed_during_the_run_fails_that_model_and_never_aborts():
    r = np.random.default_rng(1)
    ids = r.integers(0, 10, size=(24, 4)).astype(np.int32)
    y = r.integers(0, 2, size=24).astype(np.int32)
    model = [{"name": "emb", "layers": [
        {"Embedding": {"input_dim": 10, "output_dim": 3}}, {"Flatten": {}},
        {"Dense": {"units": 2, "activation": "softmax"}}]}]

    def change(name, epoch, logs):
        if epoch == 1:
            ids[3, 2] = 1_000_000

    run = nnfleet.train(model, ids, y, on_epoch_end=change, _hold_at_epoch_end=True, **FIT)
    assert run["emb"].status == "failed"
    assert "sample 3 of the training data holds input value 1000000" in run["emb"].message
    assert "Embedding" in run["emb"].message and "[0, 10)" in run["emb"].message


def test_a_test_label_changed_during_the_run_fails_that_model():
    x, y = blobs(32)
    tx, ty = blobs(8, seed=4)
    ty = ty.copy()

    def change(name, epoch, logs):
        if epoch == 2:
            ty[1] = -1

    run = nnfleet.train(TINY, x, y, test_data=(tx, ty), on_epoch_end=change,
                        _hold_at_epoch_end=True, **FIT)
    assert run["m"].status == "failed"
    assert "sample 1 of the test data holds label -1" in run["m"].message


# A train on another thread, held at its first epoch's end (the worker waits for the callback,
# which waits for `release`): the main thread knows it is inside the engine, and the run cannot
# end before what the test does next. `release` is set by the exit (a threading exit hook,
# called after nnfleet's, which stops the run) or by the script itself. The run reports
# `interrupted`; whether its model ends cancelled or done depends on when the fleet's own loop
# passes the stop on to the worker, so the models' status is not asserted.
SCRIPT = textwrap.dedent("""
    import sys, threading
    running, release = threading.Event(), threading.Event()
    # Registered before nnfleet's: threading calls its exit hooks last first.
    threading._register_atexit(release.set)
    import numpy as np, nnfleet
    sys.path.insert(0, {tests!r})
    from conftest import blobs
    x, y = blobs(16)
    result = {{}}

    def held(*args):
        running.set()
        release.wait()

    def work():
        try:
            result["run"] = nnfleet.train(
                [{{"name": "m", "layers": [{{"Flatten": {{}}}}, {{"Dense": {{"units": 3}}}}]}}],
                x, y, epochs=3, batch_size=8, progress=False, workers=1,
                loss="sparse_categorical_crossentropy", on_epoch_end=held,
                _hold_at_epoch_end=True)
        finally:
            running.set()  # a train that failed to start must not leave main waiting
        print("thread: interrupted", result["run"].interrupted, result["run"]["m"].status,
              flush=True)

    t = threading.Thread(target=work, daemon={daemon})
    t.start()
    running.wait()
    print("main: running", flush=True)
    {then}
""")


def run_script(daemon, then, **kw):
    code = SCRIPT.format(tests=os.path.dirname(__file__), daemon=daemon, then=then)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.mark.parametrize("daemon", [True, False])
def test_the_interpreter_exits_cleanly_while_a_thread_trains(daemon):
    p = run_script(daemon, "sys.exit(0)")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "terminate" not in p.stderr and "Fatal" not in p.stderr, p.stderr[-2000:]
    assert "main: running" in p.stdout
    # The train was stopped, as Ctrl-C stops one, and returned (a daemon thread may be ended by
    # the interpreter before it prints).
    if not daemon:
        assert "thread: interrupted True" in p.stdout


def test_ctrl_c_stops_a_train_on_another_thread():
    # The main thread waits in join(); SIGINT raises KeyboardInterrupt there, which ends the
    # program: the exit stops the train on the other thread, which returns, and the exit joins it.
    p = run_script(False, "import os, signal; os.kill(os.getpid(), signal.SIGINT); t.join()")
    assert p.returncode in (-signal.SIGINT, 130), (p.returncode, p.stderr[-2000:])
    assert "KeyboardInterrupt" in p.stderr
    assert "terminate" not in p.stderr
    assert "thread: interrupted True" in p.stdout


def test_stop_stops_a_train_on_another_thread_after_a_caught_ctrl_c():
    then = textwrap.dedent("""
    try:
        import os, signal
        os.kill(os.getpid(), signal.SIGINT)
        t.join()
    except KeyboardInterrupt:
        nnfleet.stop()
        release.set()
        t.join()
        print("main: joined", flush=True)
    """)
    p = run_script(False, then)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "thread: interrupted True" in p.stdout
    assert p.stdout.rstrip().endswith("main: joined")
