# setuptools' part of `pip install --no-build-isolation .` (pyproject.toml; the PEP 517 hooks are
# python/build_backend/nnfleet_build.py's): CMake builds the extension nnfleet._core and the
# nnfleet tool (the targets `make build` builds), which are copied into the package being
# installed; the tool is run by the `nnfleet` command (nnfleet/_cli.py).
#   NNFLEET_BUILD       the CMake build folder (default build/, the one `make` uses, whose objects
#                       are then reused; relative to this folder). setuptools' own build folder and
#                       egg-info go into <it>/pip, so that nothing is written into the source tree.
#   NNFLEET_CMAKE_ARGS  more -D options when configuring (e.g. -DNNFLEET_TESTS=OFF).
# With ccache installed, CMakeLists.txt compiles through it (NNFLEET_CCACHE).
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import ExecError

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(ROOT, os.environ.get("NNFLEET_BUILD", "build"))
PIP_DIR = os.path.join(BUILD, "pip")
SETUP_HINT = "`make setup` (scripts/setup, as root) installs what the build needs"


def stop(message):
    """Ends the build with one line (setuptools prints an ExecError as `error: ...`)."""
    raise ExecError("nnfleet: " + message)


def cmake_project_version():
    """The x.y.z of CMakeLists.txt's project(nnfleet VERSION x.y.z), the one place it is written."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        found = re.search(r"^project\(nnfleet\s+VERSION\s+([0-9.]+)", f.read(), re.MULTILINE)
    if not found:
        raise RuntimeError("nnfleet: CMakeLists.txt has no `project(nnfleet VERSION x.y.z` line")
    return found.group(1)


def cached(name):
    """A value of BUILD's CMakeCache.txt, or None."""
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt"), encoding="utf-8") as f:
            found = re.search(rf"^{name}:[A-Z]+=(.*)$", f.read(), re.MULTILINE)
    except FileNotFoundError:
        return None
    return found.group(1) if found else None


def check_tools():
    """cmake, ninja and a C++ compiler, named by their Debian packages when missing."""
    tools = {"cmake": "cmake", "ninja": "ninja-build", "c++": "build-essential"}
    missing = [f"{tool} (Debian: {pkg})" for tool, pkg in tools.items() if not shutil.which(tool)]
    if missing:
        stop(f"the build needs {', '.join(missing)}, not found on PATH; {SETUP_HINT}")


def ensure_uplot():
    """The report embeds uPlot from report/node_modules, which scripts/setup fills (`npm ci`): when
    it is missing, the same install from the local npm cache (offline), else one message."""
    dist = cached("NNFLEET_UPLOT_DIR") or os.path.join(ROOT, "report", "node_modules", "uplot",
                                                       "dist")
    wanted = [os.path.join(dist, f) for f in ("uPlot.iife.min.js", "uPlot.min.css")]
    if all(os.path.exists(f) for f in wanted):
        return
    npm = shutil.which("npm")
    modules = os.path.join(ROOT, "report", "node_modules")
    if os.path.islink(modules):
        # `npm ci` empties node_modules first: through a link, another tree's copy.
        why = f"report/node_modules is a link ({os.readlink(modules)}), which npm ci would empty"
    elif npm:
        print("nnfleet: report/node_modules has no uPlot; npm ci --offline in report/", flush=True)
        done = subprocess.run([npm, "ci", "--offline", "--no-audit", "--no-fund"],
                              cwd=os.path.join(ROOT, "report"), capture_output=True, text=True)
        if done.returncode == 0 and all(os.path.exists(f) for f in wanted):
            return
        why = "`npm ci --offline` in report/ found no copy in the local npm cache"
    else:
        why = "npm is not installed"
    stop(f"the HTML report embeds uPlot (npm package uplot, report/package-lock.json), not found "
         f"in {dist}, and {why}; run `make setup` (scripts/setup) once: it installs Node.js and "
         f"npm, and runs `npm ci` in report/")


def run(args, what):
    if subprocess.run(args).returncode != 0:
        stop(f"{what} failed (CMake's output is above); {SETUP_HINT}")


def base_python():
    """The interpreter the module is built for: a venv's own base interpreter (so that the build
    folder does not name a venv that may be deleted), or None for Debian's /usr/bin/python3,
    which CMakeLists.txt takes by default."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return None if exe == os.path.realpath("/usr/bin/python3") else exe


def configure():
    """Configures BUILD when it is new or NNFLEET_CMAKE_ARGS asks; a configured folder is reused
    as it is (`cmake --build` reconfigures it by itself when a CMakeLists.txt changed)."""
    home = cached("CMAKE_HOME_DIRECTORY")
    if home and os.path.realpath(home) != os.path.realpath(ROOT):
        stop(f"the build folder {BUILD} (NNFLEET_BUILD) belongs to the source tree {home}, not to "
             f"{ROOT}; expected a folder of this tree or a new one")
    extra = shlex.split(os.environ.get("NNFLEET_CMAKE_ARGS", ""))
    if cached("NNFLEET_PYTHON") == "OFF":  # e.g. a folder configured like `make asan`'s
        extra.append("-DNNFLEET_PYTHON=ON")
    if home and not extra:
        return
    args = ["cmake", "-S", ROOT, "-B", BUILD, "-DNNFLEET_PYTHON=ON"]
    if not home:
        args += ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
        if base_python():
            args.append("-DPython3_EXECUTABLE=" + base_python())
    run(args + extra, "configuring nnfleet with CMake")


def build_targets():
    """Builds the module and the tool; returns their paths."""
    found = cached("pybind11_DIR")
    if not found or found.endswith("NOTFOUND"):
        stop(f"CMake found no pybind11 (Debian: python3-pybind11 python3-dev) for the Python of "
             f"{BUILD}, so it builds no module; {SETUP_HINT}")
    run(["cmake", "--build", BUILD, "--target", "nnfleet_python", "nnfleet"],
        "building nnfleet with CMake")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = os.path.join(BUILD, "python", "nnfleet", "_core" + suffix)
    if not os.path.exists(module):
        others = glob.glob(os.path.join(BUILD, "python", "nnfleet", "_core*.so"))
        stop(f"{BUILD} builds the module for another Python ({', '.join(others) or 'none built'}); "
             f"this pip runs {sys.executable} {sys.version.split()[0]}: give it a build folder of "
             f"its own, e.g. NNFLEET_BUILD=build-py{sys.version_info[0]}{sys.version_info[1]}")
    return module, os.path.join(BUILD, "nnfleet")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        check_tools()
        ensure_uplot()
        configure()
        module, tool = build_targets()
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.join(os.path.dirname(dest), "_bin"), exist_ok=True)
        shutil.copyfile(module, dest)
        # The tool inside the package (nnfleet/_bin/nnfleet, mode kept: pip keeps the executable
        # bit of a wheel's file), run by the `nnfleet` console script, nnfleet._cli:main.
        shutil.copy2(tool, os.path.join(os.path.dirname(dest), "_bin", "nnfleet"))


os.makedirs(PIP_DIR, exist_ok=True)
setup(version=cmake_project_version(), ext_modules=[Extension("nnfleet._core", sources=[])],
      cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": os.path.join(PIP_DIR, "build")},
               "egg_info": {"egg_base": PIP_DIR}})
