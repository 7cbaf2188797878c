"""The peers' environment (bench/run_bench.py) and the peer-kernels probe's parser
(bench/peers/peer_kernels.py), issue 14's fair peer: the variables that hold OpenBLAS to a named
core are removed from the peers' environment, shown as `env -u` in the recorded commands, and
oneDNN's verbose lines are reduced to kind, propagation and implementation.
Run by CTest: /usr/bin/python3 -m pytest.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "bench", "peers"))
import peer_kernels  # noqa: E402
import run_bench  # noqa: E402


def test_none_removes_a_variable_and_strings_set_it(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1048576")
    env = run_bench.child_env({"OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None,
                               "OMP_NUM_THREADS": "1"})
    assert "OPENBLAS_CORETYPE" not in env
    assert "OPENBLAS_L2_SIZE" not in env
    assert env["OMP_NUM_THREADS"] == "1"
    assert env["PATH"] == os.environ["PATH"]


def test_the_shown_command_unsets_what_the_peer_runs_without():
    shown = run_bench.shown_env({"OMP_NUM_THREADS": "1", "OPENBLAS_CORETYPE": None})
    assert shown == "env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=1"
    assert run_bench.shown_env({"A": "x y"}) == "A='x y'"
    assert run_bench.shown_env(None) == ""


def test_onednn_exec_lines_become_kind_propagation_and_implementation():
    lines = [
        "onednn_verbose,info,oneDNN v2.6.3",
        "onednn_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32::blocked:abcd,,"
        "alg:convolution_direct,mb32_ic32oc64_ih26oh24kh3,0.5",
        "onednn_verbose,exec,cpu,convolution,jit:avx2,forward_training,other,,,0.4",
        "dnnl_verbose,exec,cpu,convolution,gemm:jit,backward_weights,x,,,1.0",
        "not a verbose line",
    ]
    assert peer_kernels.parse_verbose(lines) == [
        "convolution forward_training: jit:avx2", "convolution backward_weights: gemm:jit"]
