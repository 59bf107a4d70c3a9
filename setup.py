"""Builds accpy._binder (the generic kernel binder) and ships native/ headers with accpy."""
import os
import shutil

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_native(build_py):
    """Copy native/ (runtime headers, Gemmini model) into the installed package as accpy/native."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "accpy", "native")
        if os.path.isdir(dst):
            shutil.rmtree(dst)
        shutil.copytree(os.path.join(HERE, "native"), dst)


setup(
    ext_modules=[
        Pybind11Extension(
            "accpy._binder",
            ["native/binder.cpp"],
            include_dirs=["native"],
            # rebuild when the shared argument-checking header changes, not only binder.cpp
            depends=["native/accpy_pyargs.hpp"],
            cxx_std=17,
            extra_compile_args=["-O2"],
            libraries=["dl"],
        )
    ],
    cmdclass={"build_ext": build_ext, "build_py": build_py_with_native},
)
