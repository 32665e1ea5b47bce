"""Fixtures for the ps-train tests: the built programs and the Fashion-MNIST LMDBs."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))   # the package, installed or not
sys.path.insert(0, str(ROOT / "tests"))    # pstrain_testing

from pstrain_testing import build_dir, fashion_mnist  # noqa: E402,F401  (fixtures)
