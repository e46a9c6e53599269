"""Build hook of the iris-gpu package (pyproject.toml holds the metadata).

A non-editable install (pip install ./python) copies iris_gpu into site-packages, away from
the repository's build/libiris.so. So the install records where that library is
(iris_gpu/_where.py: this repository's build directory) and, when `make lib` has built it,
ships a copy inside the package (and of libiris_jax.so, when `make lib-jax` has built it:
iris_gpu.jax loads it from beside the libiris.so in use). iris_gpu._lib looks at both, after
$IRIS_LIB.
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
        # libiris_jax.so too (make lib-jax): iris_gpu.jax loads it from beside the libiris.so
        # it uses, which is this copy once the tree's build directory is gone
        for name in ("libiris.so", "libiris_jax.so"):
            lib = os.path.join(BUILD, name)
            if os.path.exists(lib):
                shutil.copy2(lib, os.path.join(pkg, name))


setup(cmdclass={"build_py": BuildPy})
