"""Where the C++ programs are, and what hardware this machine has."""
from __future__ import annotations

import os
import pathlib
import json
import shutil
import subprocess

from .errors import ProgramNotFound

# The repository this package lives in (python/pstrain/ -> the root), when it does.
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def find_program(name: str) -> pathlib.Path:
    """The program `name`: in $PSTRAIN_BUILD_DIR/bin (relative to the checkout when not
    absolute), else in the checkout's build/bin, else on PATH (an installed PSTrain,
    `cmake --install build --prefix P` with P/bin on PATH). Raises ProgramNotFound naming
    every place it looked."""
    candidates = []
    if os.environ.get("PSTRAIN_BUILD_DIR"):
        build = pathlib.Path(os.environ["PSTRAIN_BUILD_DIR"])
        candidates.append((build if build.is_absolute() else REPO_ROOT / build) / "bin" / name)
    candidates.append(REPO_ROOT / "build" / "bin" / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found:
        return pathlib.Path(found)
    looked = ", ".join(str(c) for c in candidates)
    raise ProgramNotFound(f"cannot find {name}: looked in {looked} and on PATH "
                          f"({os.environ.get('PATH', '')}); build the project "
                          "(bash scripts/setup.sh), set PSTRAIN_BUILD_DIR, or install it "
                          "(cmake --install build --prefix P) and put P/bin on PATH")


def gpu_count() -> int:
    """GPUs that `nvidia-smi -L` lists; 0 without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def cuda_build() -> bool:
    """Whether the programs were built with CUDA (`ps-net devices --json`)."""
    try:
        ps_net = find_program("ps-net")
        out = subprocess.run([str(ps_net), "devices", "--json"], capture_output=True, text=True,
                             timeout=60)
        return bool(json.loads(out.stdout.strip().splitlines()[-1]).get("cuda_build"))
    except (ProgramNotFound, OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return False
