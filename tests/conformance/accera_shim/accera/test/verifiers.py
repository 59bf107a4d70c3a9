"""accera.test.verifiers on accpy: Accera's test helpers (VerifyPackage, check_correctness,
file_checker) with the package loaded by `accpy.load` instead of hatlib.

Results are compared as Accera compares them: each argument cast to float64, then
`numpy.testing.assert_allclose(actual, desired, rtol=tolerance)`. A mismatch raises
`WrongResult` (an AssertionError), which the conformance runner reports first.
"""
from __future__ import annotations

import glob
import os
import pathlib
import unittest
from copy import deepcopy
from typing import List

import numpy as np

import accpy


class WrongResult(AssertionError):
    """A function built by accpy returned values other than the test's expected ones."""


class CorrectnessChecker:
    def __init__(self, hat_path):
        self.package = accpy.load(hat_path)

    def run(self, function_name: str, before: List[np.ndarray], after: List[np.ndarray], tolerance: float = 1e-5):
        if function_name not in self.package.function_names:
            raise ValueError(f"{function_name} is not found")
        args = deepcopy(before)  # the test's arrays stay as they were
        self.package[function_name](*args)
        for pos, (actual, desired) in enumerate(zip(args, after)):
            try:
                np.testing.assert_allclose(np.asarray(actual).astype(np.double), np.asarray(desired).astype(np.double),
                                           rtol=tolerance)
            except AssertionError as e:
                detail = " ".join(str(e).split())
                raise WrongResult(f"{function_name}: argument {pos} differs from the expected values: {detail}") from None


class FileChecker:
    """Accera's FileCheck wrapper: its checks are on MLIR / LLVM IR / assembly text, which accpy
    does not write (such tests are out of scope); running one says so."""

    def __init__(self, file_path: pathlib.Path):
        self.file_path = file_path
        self.directives = []

    def _add(kind):
        def add(self, pattern, *n):
            self.directives.append((kind, pattern) + n)
        return add

    check = _add("CHECK")
    check_label = _add("CHECK-LABEL")
    check_next = _add("CHECK-NEXT")
    check_same = _add("CHECK-SAME")
    check_count = _add("CHECK-COUNT")
    check_dag = _add("CHECK-DAG")
    check_not = _add("CHECK-NOT")

    def run(self, quiet=True):
        from accera import NotInAccpyError

        raise NotInAccpyError(f"accpy has no equivalent of Accera's FileCheck on {self.file_path.name} "
                              "(MLIR / LLVM IR text)")


class VerifyPackage:
    """Checks that a build writes the expected files, and runs its functions against expected values."""

    def __init__(self, testcase: unittest.TestCase, package_name: str, output_dir: str = None,
                 file_list: List[str] = None):
        self.testcase = testcase
        self.output_dir = output_dir
        base = pathlib.Path(output_dir or pathlib.Path.cwd())
        self.file_list = [base / f for f in file_list] if file_list else [base / f"{package_name}.hat"]
        self.correctness_checker = None

    def __enter__(self):
        for f in self.file_list:
            if f.exists():
                f.unlink()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        # Accera checks the files even while an exception is on its way out (its message then hides
        # the first error); here the first error is the one reported
        if exc_type is None:
            for f in self.file_list:
                self.testcase.assertTrue(f.is_file(), f"{f} was expected, but not found to be a file")

    def check_correctness(self, function_name: str, before: List[np.ndarray], after: List[np.ndarray],
                          tolerance: float = 1e-5):
        hats = [f for f in self.file_list if f.suffix == ".hat"]
        if not hats:
            print("Warning: check_correctness was called but no hat file was generated. Correctness check skipped.")
            return
        if self.correctness_checker is None:
            self.correctness_checker = CorrectnessChecker(hats[0])
        self.correctness_checker.run(function_name, before, after, tolerance)

    def file_checker(self, filename):
        path = pathlib.Path(filename)
        if not os.path.isfile(path.absolute()):
            found = glob.glob(f"{self.output_dir}/**/{filename}", recursive=True)
            if not found:
                raise ValueError(f"{filename} not found, did you set the correct Package.Format?")
            path = pathlib.Path(found[0])
        return FileChecker(path.resolve())
