"""W4's plan and data for the benchmark: tools/make_w4_series.py writes the workload's series,
and bench/run_bench.py derives its reduced plans from examples/forecast.yaml (one model of each
architecture per series, every series its own data through the {k} placeholder).
Run by CTest: /usr/bin/python3 -m pytest."""
import os
import re
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import run_bench  # noqa: E402
import workloads  # noqa: E402

FORECAST = os.path.join(REPO, "examples", "forecast.yaml")


def test_the_generator_writes_the_windows_the_workload_defines(tmp_path):
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_w4_series.py"),
                    str(tmp_path), "--series", "2"], check=True, capture_output=True)
    assert sorted(os.listdir(tmp_path)) == sorted(
        f"series_{k:02d}_{part}_{xy}.npy" for k in range(2) for part in ("train", "test")
        for xy in "xy")
    x = np.load(tmp_path / "series_01_train_x.npy")
    y = np.load(tmp_path / "series_01_train_y.npy")
    tx = np.load(tmp_path / "series_01_test_x.npy")
    ty = np.load(tmp_path / "series_01_test_y.npy")
    assert x.dtype == np.float32 and x.shape == (workloads.W4_TRAIN, workloads.W4_WINDOW, 1)
    assert y.shape == (workloads.W4_TRAIN, 1)
    # Sliding windows in time order: each target is the next window's last value, and the test
    # windows continue where the training ones stop.
    assert np.array_equal(x[1:, -1, 0], y[:-1, 0])
    assert np.array_equal(tx[0, :-1, 0], x[-1, 1:, 0]) and tx[0, -1, 0] == y[-1, 0]
    assert len(tx) == len(ty) and len(tx) + len(x) == 4096 - workloads.W4_WINDOW
    # The series is standardized over its whole length.
    whole = np.concatenate([x[0, :, 0], y[:, 0], ty[:, 0]])
    assert abs(float(whole.mean())) < 0.05 and abs(float(whole.std()) - 1) < 0.05


def test_a_reduced_plan_keeps_every_architecture_on_fewer_series(tmp_path):
    b = object.__new__(run_bench.Bench)
    b.work = str(tmp_path)
    text = open(b.w4_plan(3, 1, "w4-test")).read()
    assert re.findall(r'k: \[[^\]]*\]', text) == ['k: ["00", "01", "02"]'] * 3
    assert "epochs: 1\n" in text and f"epochs: {workloads.W4_EPOCHS}" not in text
    assert text.count(run_bench.DATA + "/w4/series_{k}_") == 4
    for arch in workloads.W4_ARCHS:
        assert f"- name: {arch}-{{k}}" in text


def test_the_example_plan_is_the_whole_workload():
    text = open(FORECAST).read()
    grids = re.findall(r'k: \[([^\]]*)\]', text)
    assert len(grids) == len(workloads.W4_ARCHS)
    for g in grids:
        assert re.findall(r'"(\d\d)"', g) == [f"{k:02d}" for k in range(workloads.W4_SERIES)]
    assert f"epochs: {workloads.W4_EPOCHS}\n" in text and "batch_size: 32\n" in text
    assert "loss: mean_squared_error" in text
    for layer in ("LSTM: {units: 32", "GRU: {units: 32", "Conv1D: {filters: 16, kernel_size: 5",
                  "dilation_rate: 2", "GlobalAveragePooling1D"):
        assert layer in text


def bench_with_fake_nnfleet(tmp_path, stderr, code):
    """A Bench whose nnfleet is a script that prints `stderr` and exits with `code`."""
    os.makedirs(tmp_path / "logs")
    fake = tmp_path / "nnfleet"
    fake.write_text("#!/bin/sh\ncat >&2 <<'EOF'\n" + stderr + "\nEOF\nexit " + str(code) + "\n")
    fake.chmod(0o755)
    b = object.__new__(run_bench.Bench)
    b.work, b.round, b.n, b.commands, b.values = str(tmp_path), 1, 2, {}, {}
    b.nnfleet = str(fake)
    b.plans = {"w4": b.w4_plan(1, 1, "w4-test")}
    return b


def test_w4_is_not_available_while_nnfleet_lacks_the_layers_and_fails_otherwise(tmp_path):
    b = bench_with_fake_nnfleet(
        tmp_path, "failed to load plan 'w4-test.yaml': 2 problem(s)\n"
        "w4-test.yaml:30: models[0].layers[0].LSTM: unknown layer class 'LSTM'; expected one of "
        "Dense, ...\nw4-test.yaml:36: models[1].layers[0].GRU: unknown layer class 'GRU'; ...", 2)
    try:
        b.w4_fleet()
        raise AssertionError("w4_fleet ran without the layers")
    except run_bench.NotAvailable as e:
        assert "this nnfleet has no GRU, LSTM layer" in str(e)
    assert b.values == {}
    other = bench_with_fake_nnfleet(tmp_path / "other", "failed to load data: disk on fire", 1)
    try:
        other.w4_fleet()
        raise AssertionError("w4_fleet hid a real failure")
    except run_bench.BenchError as e:
        assert "disk on fire" in str(e)
