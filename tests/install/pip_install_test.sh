#!/usr/bin/env bash
# A Python user's install, as the README says it (CTest: python_pip_install): a fresh clone of
# SOURCE's committed HEAD (uncommitted changes are not part of it), a fresh venv, then
#   pip install --no-build-isolation .
# and the installed module (a tiny model trained from NumPy arrays), the `nnfleet` command
# (--version, `train` of a tiny plan and its `report`), and a source tree left with no untracked
# file.
# The clone's build compiles through ccache (CMakeLists.txt, NNFLEET_CCACHE) with the options of
# the build that runs this test (CMAKE_ARGS...), so that its objects come from that build's
# cache entries.
#   pip_install_test.sh SOURCE WORK_PARENT PYTHON VERSION CMAKE_ARGS...
set -euo pipefail
source_dir=$1 work_parent=$2 python=$3 version=$4
shift 4
fail() { echo "python_pip_install: $*" >&2; exit 1; }

command -v git >/dev/null || fail "git is not installed; expected git, to clone $source_dir"
git -C "$source_dir" rev-parse --verify -q HEAD >/dev/null ||
  fail "$source_dir is not a git repository with a commit; this test installs a clone of its HEAD"
mkdir -p "$work_parent"
# Its own folder, removed however the test ends, so that runs in parallel never meet.
work=$(mktemp -d "$work_parent/pip-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap runs when CTest stops the test
venv=$work/venv

git clone -q "$source_dir" "$work/src"
"$python" -m venv --system-site-packages "$venv" ||
  fail "$python -m venv failed; expected Debian's python3-venv (scripts/setup installs it)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 NNFLEET_CMAKE_ARGS="$*"
unset NNFLEET_BUILD
(cd "$work/src" && "$venv/bin/pip" install -q --no-build-isolation .) ||
  fail "pip install --no-build-isolation . failed in a fresh clone (output above)"

# The package left nothing untracked in the tree (its egg-info is in build/pip).
untracked=$(git -C "$work/src" status --porcelain --untracked-files=all)
[ -z "$untracked" ] || fail "the install left files in the source tree: $untracked"
if compgen -G "$work/src/python/*.egg-info" >/dev/null; then fail "an egg-info in python/"; fi
[ -d "$work/src/build/pip/nnfleet.egg-info" ] || fail "expected the egg-info in build/pip/"

cd "$work"  # not the clone: `import nnfleet` must find the installed package
"$venv/bin/python" - "$venv" <<'PY'
import os
import sys

import numpy as np

import nnfleet

venv = sys.argv[1]
assert nnfleet.__file__.startswith(os.path.join(venv, "lib")), nnfleet.__file__
r = np.random.default_rng(1)
x = r.random((64, 4)).astype(np.float32)
y = (x[:, 0] > 0.5).astype(np.int32)
model = {"name": "tiny", "layers": [{"Dense": {"units": 4, "activation": "relu"}},
                                    {"Dense": {"units": 2, "activation": "softmax"}}]}
run = nnfleet.train([model], x, y, epochs=2, batch_size=16, loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"], progress=False)
assert run["tiny"].status == "done", run["tiny"].status
assert len(run["tiny"].history["loss"]) == 2, run["tiny"].history
np.save("x.npy", x)
np.save("y.npy", y)
print("import nnfleet: trained", run["tiny"].metrics)
PY

[ -x "$venv/bin/nnfleet" ] || fail "no nnfleet command in $venv/bin"
got=$("$venv/bin/nnfleet" --version)
[ "$got" = "nnfleet $version" ] ||
  fail "nnfleet --version printed '$got'; expected 'nnfleet $version'"
cat > plan.yaml <<'YAML'
seed: 3
data: {train: {x: x.npy, y: y.npy}, validation_split: 0.25}
defaults: {epochs: 2, batch_size: 16, loss: sparse_categorical_crossentropy, metrics: [accuracy]}
models:
  - name: tiny
    layers: [{Dense: {units: 4, activation: relu}}, {Dense: {units: 2, activation: softmax}}]
YAML
"$venv/bin/nnfleet" train plan.yaml --out run --quiet || fail "nnfleet train plan.yaml failed"
"$venv/bin/python" -c '
import json
models = json.load(open("run/results.json"))["models"]
assert [m["name"] for m in models] == ["tiny"] and models[0]["status"] == "done", models
' || fail "run/results.json does not record the tiny model as done"
"$venv/bin/nnfleet" report run >/dev/null || fail "nnfleet report run failed"
grep -q "uPlot" run/report.html || fail "run/report.html has no embedded uPlot"
echo "python_pip_install: ok"
