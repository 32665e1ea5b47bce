"""Shared by the Python test suites (tests/python, tests/e2e, tests/multihost;
each conftest.py puts this folder on sys.path): where the built programs are,
the Fashion-MNIST LMDBs and a small valid job to start job files from. A
conftest.py imports the fixtures build_dir and fashion_mnist to offer them."""
from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Iterable

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def find_build_dir(programs: Iterable[str]) -> pathlib.Path:
    """The build folder ($PSTRAIN_BUILD_DIR, relative to the repository, or
    build/); fails the test naming the first of `programs` missing from bin/."""
    path = pathlib.Path(os.environ.get("PSTRAIN_BUILD_DIR", "build"))
    path = path if path.is_absolute() else ROOT / path
    for program in programs:
        if not (path / "bin" / program).exists():
            pytest.fail(f"{path}/bin/{program} not found: build first (bash scripts/setup.sh)")
    return path


def prepare_fashion_mnist(build: pathlib.Path) -> pathlib.Path:
    """The Fashion-MNIST LMDBs under data/, converted on first use."""
    data = ROOT / "data" / "fashion-mnist"
    if not (data / "train_lmdb").exists() or not (data / "test_lmdb").exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "prepare_data.sh"), str(build)],
                       check=True, timeout=600)
    return data


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    """The build folder holding ps-server, ps-worker and ps-data."""
    return find_build_dir(("ps-server", "ps-worker", "ps-data"))


@pytest.fixture(scope="session")
def fashion_mnist(build_dir: pathlib.Path) -> pathlib.Path:
    """The Fashion-MNIST LMDBs under data/, converted on first use."""
    return prepare_fashion_mnist(build_dir)


def base_job(tmp: pathlib.Path, **changes) -> dict:
    """A small valid job (LeNet, 1 server, 2 workers, ssp) writing under tmp/runs."""
    job = {
        "name": "tiny",
        "solver": str(ROOT / "configs/nets/lenet_solver.prototxt"),
        "solver_overrides": {"max_iter": 60, "test_interval": 30, "test_iter": 10,
                             "snapshot": 30, "display": 10},
        "cluster": {"servers": 1, "workers": 2, "worker_devices": "cpu",
                    "threads_per_worker": 1, "hosts": "local", "straggler": None},
        "consistency": {"mode": "ssp", "staleness": 2},
        "transport": {"kind": "tcp", "interface": "127.0.0.1"},
        "data": None,
        "output": str(tmp / "runs"),
        "restart": {"max_worker_restarts": 3},
    }
    job.update(changes)
    return job
