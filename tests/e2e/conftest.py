"""Shared fixtures for the end-to-end tests: where the built programs are."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("PSTRAIN_BUILD_DIR", "build"))
    if not path.is_absolute():
        path = ROOT / path
    if not (path / "bin" / "ps-net").exists():
        pytest.fail(f"{path}/bin/ps-net not found: build first (bash scripts/setup.sh)")
    return path


@pytest.fixture(scope="session")
def fashion_mnist(build_dir: pathlib.Path) -> pathlib.Path:
    """The Fashion-MNIST LMDBs under data/, converted on first use."""
    data = ROOT / "data" / "fashion-mnist"
    if not (data / "train_lmdb").exists() or not (data / "test_lmdb").exists():
        import subprocess

        subprocess.run(["bash", str(ROOT / "scripts" / "prepare_data.sh"), str(build_dir)],
                       check=True, timeout=600)
    return data
