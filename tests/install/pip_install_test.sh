#!/usr/bin/env bash
# A Python user's install, as the README says it (CTest: python_pip_install): a fresh clone of
# SOURCE's committed HEAD (uncommitted changes are not part of it), README's quick start run as
# written (a fresh venv, pip install --no-build-isolation ., then its Python example), and the
# installed module (a tiny model trained from NumPy arrays), the `nnfleet` command
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
git clone -q "$source_dir" "$work/src"
# README.md's "Quick start from Python": its sh block (the venv in .venv, then pip install) run
# as written in the clone, and its python block run below by the installed module.
readme_block() {
  "$python" - "$work/src/README.md" "$1" <<'PY'
import re, sys
section = open(sys.argv[1]).read().split("## Quick start from Python", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```" + sys.argv[2] + r"\n(.*?)```", section, re.S)
assert len(blocks) == 1, f"README's quick start has {len(blocks)} {sys.argv[2]} blocks; expected 1"
print(blocks[0])
PY
}
quick_sh=$(readme_block sh) || fail "README.md has no quick start sh block"
quick_py=$(readme_block python) || fail "README.md has no quick start python block"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 NNFLEET_CMAKE_ARGS="$*"
unset NNFLEET_BUILD
(cd "$work/src" && PATH="$(dirname "$python"):$PATH" bash -euo pipefail -c "$quick_sh") ||
  fail "README's quick start (python3 -m venv, pip install --no-build-isolation .) failed in a fresh clone (output above)"
venv=$work/src/.venv

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

# The quick start's python block, on a 300-image stand-in for Fashion-MNIST in its IDX format.
mkdir fmnist
"$venv/bin/python" - fmnist <<'PY'
import gzip, struct, sys
import numpy as np
r = np.random.default_rng(1)
for prefix, n in (("train", 300), ("t10k", 50)):
    y = r.integers(0, 10, n).astype(np.uint8)
    x = r.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 2 * c:2 * c + 6, 4:24] = 255
    with gzip.open(f"{sys.argv[1]}/{prefix}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + x.tobytes())
    with gzip.open(f"{sys.argv[1]}/{prefix}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + y.tobytes())
PY
quick_out=$(NNFLEET_FASHION_MNIST=$PWD/fmnist "$venv/bin/python" -c "$quick_py") ||
  fail "README's quick start python block failed with the installed module (output above)"
echo "$quick_out"
for m in mlp-16 mlp-32 mlp-64 mlp-128 mlp-256; do
  grep -q "^[0-9]* *$m " <<<"$quick_out" || fail "the quick start printed no row for $m"
done
grep -q "<html" report.html || fail "the quick start wrote no report.html"

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
