"""Fixtures for the multi-host tests: three hosts made of network namespaces
(netns_hosts.py), the built programs and the Fashion-MNIST LMDBs. Every test
here skips, with the reason, where namespaces or sshd are not available."""
from __future__ import annotations

import pathlib
import shutil
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests"))    # pstrain_testing
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import netns_hosts  # noqa: E402
from pstrain_testing import build_dir, fashion_mnist  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="module")
def hosts():
    """Three hosts (1: the server's, 2 and 3: the workers'), closed after the module."""
    why = netns_hosts.unavailable()
    if why:
        pytest.skip(f"multi-host tests need network namespaces and sshd: {why}")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pstrain-hosts-"))
    made = netns_hosts.NetnsHosts(folder, 3)
    try:
        yield made
    finally:
        made.close()
        shutil.rmtree(folder, ignore_errors=True)
