"""The net-prototxt fuzzer's seeds (fuzz/corpus/net_prototxt) reach every
layer type the engine registers: each type is in some seed, and each seed
builds and runs one forward and backward pass on the fuzz target's path
(fuzz_replay_net_prototxt, PSTRAIN_FUZZ_VERBOSE=1 says how far each got), or
stops where its expected outcome says."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from pstrain_testing import ROOT, find_build_dir

SEEDS = ROOT / "fuzz" / "corpus" / "net_prototxt"

# Registered types no seed names, and why.
NOT_SEEDED = {
    "Python": "runs a user's module in an embedded interpreter: a fuzzer would import "
              "whatever module name it made up",
    "HDF5Output": "creates its file_name at set-up: the fuzz target builds no net holding one "
                  "(catalogue_hdf5_output.prototxt shows the refusal)",
}

MEMORY_DATA_REFUSED = (
    "fuzz.prototxt: layer 'in' (MemoryData): MemoryData takes its samples from arrays handed "
    "over in Python (pstrain.caffe's Net.set_input_arrays) or from .npy files (ps-net's and "
    "ps-worker's --memory-data in=DATA.npy,LABELS.npy); ps-net and ps-train jobs have none to "
    "give it otherwise (use a Data layer over an LMDB, --memory-data, or pstrain.caffe)")

# What the verbose replay says of each seed that stops early (every other
# seed: built, ran): the nets over LMDBs name a folder that is not there, the
# benchmark nets are larger than the fuzz target allows or runs.
NO_LMDB = ("fuzz.prototxt: layer 'mnist' (Data): /nonexistent/train_lmdb: cannot open LMDB "
           "(No such file or directory)")
OUTCOMES = {
    "catalogue_memory_data.prototxt": [MEMORY_DATA_REFUSED],
    "catalogue_hdf5_data.prototxt": [
        "fuzz.prototxt: layer 'data' (HDF5Data): /nonexistent/source.txt: cannot open the list "
        "of HDF5 files"],
    "catalogue_hdf5_output.prototxt": ["not built: writes files"],
    "catalogue_window_data.prototxt": [
        "fuzz.prototxt: layer 'data' (WindowData): window_data_param.source: "
        "/nonexistent/windows.txt: cannot open (No such file or directory)"],
    "catalogue_image_data.prototxt": [
        "fuzz.prototxt: layer 'data' (ImageData): /nonexistent/list.txt: cannot open (No such "
        "file or directory)"],
    "cifar10_quick_bench.prototxt": [
        "fuzz.prototxt: layer 'conv1' (Convolution): top 0 of shape 100 32 32 32 (3276800) is "
        "larger than the limit of 1048576 values"],
    "lenet_bench.prototxt": ["built", "not run: tops hold 1292481 values"],
    "mlp_dropout.prototxt": [NO_LMDB],
    "mlp_smooth.prototxt": [NO_LMDB],
}


def registered_layer_types() -> set[str]:
    """The type names worker/ registers (PSTRAIN_REGISTER_LAYER("Name", ...))."""
    found = set()
    for path in (ROOT / "worker").rglob("*.cpp"):
        found |= set(re.findall(r'PSTRAIN_REGISTER_LAYER\(\s*"(\w+)"', path.read_text()))
    assert len(found) > 50, f"the registrations were not found: {sorted(found)}"
    return found


def seeded_layer_types() -> dict[str, set[str]]:
    return {path.name: set(re.findall(r'\btype:\s*"(\w+)"', path.read_text()))
            for path in sorted(SEEDS.iterdir())}


def test_every_registered_layer_type_is_in_a_seed():
    registered = registered_layer_types()
    seeded = set().union(*seeded_layer_types().values())
    assert set(NOT_SEEDED) <= registered, "NOT_SEEDED names a type the engine lacks"
    missing = registered - seeded - set(NOT_SEEDED)
    assert not missing, f"layer types no seed of {SEEDS} uses: {sorted(missing)}"


def replay_verbose(paths: list[pathlib.Path]) -> dict[str, list[str]]:
    """Per seed file name, the lines the verbose fuzz target printed for it."""
    program = find_build_dir(("fuzz_replay_net_prototxt",)) / "bin" / "fuzz_replay_net_prototxt"
    done = subprocess.run([str(program), *map(str, paths)], capture_output=True, text=True,
                          timeout=300,
                          env={**os.environ, "PSTRAIN_FUZZ_VERBOSE": "1", "OMP_NUM_THREADS": "1",
                               "OPENBLAS_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, list[str]] = {}
    current = None
    for line in done.stderr.splitlines():
        head = re.match(r"replay (.+) \(\d+ bytes\)$", line)
        if head:
            current = pathlib.Path(head.group(1)).name
            report[current] = []
        elif current is not None and line.startswith("  "):
            report[current].append(line.strip())
    return report


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.iterdir()))
def test_seed_builds_and_runs(seed):
    report = replay_verbose([SEEDS / seed])
    assert report == {seed: OUTCOMES.get(seed, ["built", "ran"])}
