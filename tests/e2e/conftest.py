"""Shared fixtures for the end-to-end tests: where the built programs are."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))    # pstrain_testing

import pstrain_testing  # noqa: E402

@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return pstrain_testing.build_dir(("ps-net",))


@pytest.fixture(scope="session")
def fashion_mnist(build_dir: pathlib.Path) -> pathlib.Path:
    return pstrain_testing.fashion_mnist(build_dir)
