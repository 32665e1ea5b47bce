"""Finds and imports PSTrain's compiled extension module, pstrain._core.

Where it looks, first match wins:
  1. $PSTRAIN_CORE_DIR (a folder holding _core*.so; ps-net and ps-worker set it
     to their build tree's when they embed Python for a Python layer);
  2. inside the installed package (`pip install .` puts it there);
  3. $PSTRAIN_BUILD_DIR/python/pstrain, then this checkout's build/python/pstrain
     (`bash scripts/setup.sh` builds it there; the package is installed
     editable, so a rebuild is picked up without reinstalling).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import pathlib
import sys
from types import ModuleType

from .programs import REPO_ROOT

_NAME = "pstrain._core"


def _candidate_dirs() -> list[pathlib.Path]:
    dirs = []
    if os.environ.get("PSTRAIN_CORE_DIR"):
        dirs.append(pathlib.Path(os.environ["PSTRAIN_CORE_DIR"]))
    dirs.append(pathlib.Path(__file__).resolve().parent)
    if os.environ.get("PSTRAIN_BUILD_DIR"):
        build = pathlib.Path(os.environ["PSTRAIN_BUILD_DIR"])
        dirs.append((build if build.is_absolute() else REPO_ROOT / build) / "python" / "pstrain")
    dirs.append(REPO_ROOT / "build" / "python" / "pstrain")
    return dirs


def _module_file(folder: pathlib.Path) -> pathlib.Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = folder / f"_core{suffix}"
        if candidate.is_file():
            return candidate
    return None


def core() -> ModuleType:
    """The extension module (imported once). Raises ImportError naming every
    place it looked and how to build it."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    looked = []
    for folder in _candidate_dirs():
        path = _module_file(folder)
        looked.append(str(folder))
        if path is None:
            continue
        spec = importlib.util.spec_from_file_location(_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[_NAME]
            raise
        return module
    raise ImportError("pstrain._core (PSTrain's compiled engine for Python) was not found; "
                      f"looked in {', '.join(looked)}. Build it with `bash scripts/setup.sh` "
                      "(or `pip install .`), or set PSTRAIN_BUILD_DIR to your build folder")
