"""Fixtures for the ps-train tests: the built programs and the Fashion-MNIST LMDBs."""
from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))   # the package, installed or not
sys.path.insert(0, str(ROOT / "tests"))    # pstrain_testing

import pstrain_testing  # noqa: E402

@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return pstrain_testing.build_dir(("ps-server", "ps-worker", "ps-data"))


@pytest.fixture(scope="session")
def fashion_mnist(build_dir: pathlib.Path) -> pathlib.Path:
    return pstrain_testing.fashion_mnist(build_dir)
