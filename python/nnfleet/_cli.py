# The `nnfleet` command of a pip-installed nnfleet (pyproject.toml's [project.scripts]): the CLI is
# a C++ program, shipped inside the package as nnfleet/_bin/nnfleet (setup.py copies the one CMake
# built), so a console script that execs it lands in the environment's bin/ wherever pip puts
# scripts (a venv, --user, --prefix), and `nnfleet` then is that program itself: same process, so
# its exit code, signals (Ctrl-C) and live terminal display are the program's own.
import os
import sys


def tool_path():
    """The packaged nnfleet program."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "nnfleet")


def main():
    tool = tool_path()
    if not os.access(tool, os.X_OK):
        sys.exit(f"nnfleet: the command-line tool is not installed with this package (expected an "
                 f"executable {tool}); reinstall with `pip install --no-build-isolation .` from "
                 f"nnfleet's source tree, or run the build's own build/nnfleet")
    os.execv(tool, ["nnfleet", *sys.argv[1:]])
