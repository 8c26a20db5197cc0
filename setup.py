"""Builds the `chorus` Python package with CMake for `pip install .` (pyproject.toml).

The extension (_chorus_torch), chorusrun and the pure-Python sources are built by the project's
own CMake into CHORUS_BUILD_DIR (default: build/pip in the checkout; an existing build folder
may be given to reuse it), for the Python that runs pip, and copied into the wheel as `chorus/`
with the launcher at chorus/bin/chorusrun. CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs.
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform and Python."""

    def has_ext_modules(self):
        return True


class CMakeBuild(build_ext):
    """build_ext runs for a distribution with compiled modules; here it runs CMake."""

    def run(self):
        build = os.path.abspath(os.environ.get("CHORUS_BUILD_DIR", os.path.join(ROOT, "build", "pip")))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DCHORUS_WITH_PYTHON=ON", "-DPYTHON_EXECUTABLE=" + sys.executable,
                                   "-DPython_EXECUTABLE=" + sys.executable])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target", "_chorus_torch",
                               "chorus_python_sources", "chorusrun"])
        assembled = os.path.join(build, "bindings", "python", "chorus")
        if not any(f.startswith("_chorus_torch") for f in os.listdir(assembled)):
            sys.exit("setup.py: %s has no _chorus_torch module: was torch found when %s was configured?"
                     % (assembled, build))
        target = os.path.join(self.build_lib, "chorus")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(assembled, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.makedirs(os.path.join(target, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(build, "bindings", "cli", "chorusrun"), os.path.join(target, "bin", "chorusrun"))


# setuptools keeps its own staging out of the CMake build folders.
setup(cmdclass={"build_ext": CMakeBuild}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join("build", "setuptools")}})
