"""Fixtures for the ps-train tests: the built programs and the Fashion-MNIST LMDBs."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))   # the package, installed or not


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("PSTRAIN_BUILD_DIR", "build"))
    path = path if path.is_absolute() else ROOT / path
    for program in ("ps-server", "ps-worker", "ps-data"):
        if not (path / "bin" / program).exists():
            pytest.fail(f"{path}/bin/{program} not found: build first (bash scripts/setup.sh)")
    return path


@pytest.fixture(scope="session")
def fashion_mnist(build_dir: pathlib.Path) -> pathlib.Path:
    data = ROOT / "data" / "fashion-mnist"
    if not (data / "train_lmdb").exists() or not (data / "test_lmdb").exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "prepare_data.sh"), str(build_dir)],
                       check=True, timeout=600)
    return data
