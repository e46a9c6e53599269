"""Build hook of the iris-gpu package (pyproject.toml holds the metadata).

A non-editable install (pip install ./python) copies iris_gpu into site-packages, away from
the repository's build/libiris.so. So the install records where that library is
(iris_gpu/_where.py: this repository's build directory) and, when `make lib` has built it,
ships a copy inside the package. iris_gpu._lib looks at both, after $IRIS_LIB.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.normpath(os.path.join(HERE, "..", "build"))


class BuildPy(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "iris_gpu")
        with open(os.path.join(pkg, "_where.py"), "w") as f:
            f.write('"""Written at install: the build directory of the iris tree this package came from."""\n')
            f.write("BUILD_DIR = %r\n" % BUILD)
        lib = os.path.join(BUILD, "libiris.so")
        if os.path.exists(lib):
            shutil.copy2(lib, os.path.join(pkg, "libiris.so"))


setup(cmdclass={"build_py": BuildPy})
