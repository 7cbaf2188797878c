#!/usr/bin/env bash
# `make python` and `make python-undo` (scripts/python_pth) in a throwaway user site (CTest:
# python_make_pth): PYTHONUSERBASE points the user site-packages at a temporary folder, so the
# machine's own site folders are never touched. The command is the one `make python` runs after
# `make build`; the undo is `make python-undo` itself.
#   python_pth_test.sh SOURCE BUILD_PYTHON_FOLDER PYTHON
set -euo pipefail
source_dir=$1 build_python=$2 python=$3
fail() { echo "python_make_pth: $*" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/nnfleet-pth.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONUSERBASE=$work/userbase PYTHONDONTWRITEBYTECODE=1
user_site=$("$python" -m site --user-site)
[[ $user_site == "$work"/* ]] || fail "the user site $user_site is not under PYTHONUSERBASE"
pth=$user_site/nnfleet.pth
undo() { make --no-print-directory -s -C "$source_dir" python-undo PYTHON3="$python"; }
path_has_build() {
  (cd / && "$python" -c 'import sys; print(sys.argv[1] in sys.path)' "$build_python")
}

out=$(undo)
[[ $out == *"nothing to undo ($pth does not exist)"* ]] || fail "undo before add said: $out"
[ "$(path_has_build)" = False ] || fail "$build_python is on sys.path before make python"

out=$("$python" "$source_dir/scripts/python_pth" add "$build_python")
[[ $out == *"wrote $pth, one line: $build_python"* ]] || fail "add did not name the file: $out"
[[ $out == *"undo: make python-undo"* ]] || fail "add did not name its undo: $out"
[ "$(cat "$pth")" = "$build_python" ] || fail "$pth holds '$(cat "$pth")'"
got=$(cd / && "$python" -c 'import nnfleet; print(nnfleet.__file__)')
[ "$got" = "$build_python/nnfleet/__init__.py" ] || fail "import nnfleet loaded $got"

out=$(undo)
[[ $out == *"removed $pth (it named $build_python)"* ]] || fail "undo said: $out"
[ ! -e "$pth" ] || fail "$pth is still there after make python-undo"
[ "$(path_has_build)" = False ] || fail "$build_python is still on sys.path after the undo"

# A folder with no built module is refused, naming what was expected, and writes nothing.
if out=$("$python" "$source_dir/scripts/python_pth" add "$work" 2>&1); then
  fail "add of a folder without the module succeeded"
fi
[[ $out == *"has no built module nnfleet"* ]] || fail "add of an empty folder said: $out"
[ ! -e "$pth" ] || fail "a refused add wrote $pth"
echo "python_make_pth: ok"
