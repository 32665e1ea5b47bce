"""Shared fixtures for the end-to-end tests: where the built programs are."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))    # pstrain_testing

import pstrain_testing  # noqa: E402
from pstrain_testing import fashion_mnist  # noqa: E402,F401  (fixture)


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    """The build folder holding ps-net."""
    return pstrain_testing.find_build_dir(("ps-net",))
