# pip's build backend for nnfleet: setuptools (setup.py at the top of the tree), taken from the
# environment pip installs into. pyproject.toml asks pip for no build requirements, because the
# machines nnfleet is built on reach no Python package index: with build isolation (pip's default)
# the isolated environment then has no setuptools, and this module says so in one message instead
# of pip's retries and "No matching distribution found for setuptools>=61".
import sys

_MESSAGE = """
nnfleet: pip's isolated build environment has no setuptools (nnfleet's build needs setuptools
and wheel, and asks pip to download nothing). Install with the environment's own:

    pip install --no-build-isolation .

which needs setuptools>=61 and wheel there: Debian's python3-setuptools and python3-wheel (make
setup installs them), seen from a venv made with `python3 -m venv --system-site-packages`; or
`pip install setuptools wheel` first where a package index is reachable.
"""


def __getattr__(name):
    """Every PEP 517 hook is setuptools.build_meta's, once setuptools can be imported."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        import setuptools
        from setuptools import build_meta
    except ImportError:
        sys.stderr.write(_MESSAGE)
        raise SystemExit(1) from None
    # 61: the first setuptools that reads pyproject.toml's [project] table.
    if int(setuptools.__version__.split(".")[0]) < 61:
        sys.stderr.write(f"\nnnfleet: setuptools {setuptools.__version__} is too old; expected "
                         ">= 61 (Debian 12's python3-setuptools is 66)\n")
        raise SystemExit(1)
    return getattr(build_meta, name)
