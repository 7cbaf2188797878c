# setuptools' hook for pyproject.toml: the extension nnfleet._core is built by CMake (the same
# target `make build` builds), then copied into the package being installed.
import glob
import os
import re
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_project_version():
    """The x.y.z of CMakeLists.txt's project(nnfleet VERSION x.y.z), the one place it is written."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        found = re.search(r"^project\(nnfleet\s+VERSION\s+([0-9.]+)", f.read(), re.MULTILINE)
    if not found:
        raise RuntimeError("nnfleet: CMakeLists.txt has no `project(nnfleet VERSION x.y.z` line")
    return found.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.join(ROOT, os.environ.get("NNFLEET_BUILD", "build"))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                               "-DCMAKE_BUILD_TYPE=Release", "-DNNFLEET_PYTHON=ON"])
        subprocess.check_call(["cmake", "--build", build, "--target", "nnfleet_python"])
        built = glob.glob(os.path.join(build, "python", "nnfleet", "_core*.so"))
        if not built:
            raise RuntimeError("nnfleet: CMake built no nnfleet/_core*.so; is python3-pybind11 "
                               "installed (scripts/setup)?")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(version=cmake_project_version(), ext_modules=[Extension("nnfleet._core", sources=[])],
      cmdclass={"build_ext": CMakeBuild})
