"""What the orchestrator asks the engine instead of keeping copies of it: the
names the engine knows (solver types, lr policies, layer types), a net's shapes
and learnable parameters, and the servers' key placement. Each is the compiled
engine's own answer through pstrain._core (python/ext/bindings_engine.cpp), so
nothing here can drift from the C++.

ps-train needs pstrain._core for these (scripts/setup.sh and `pip install .`
always build it); without it the first question raises ImportError saying
where it looked and how to build it (_native.py).
"""
from __future__ import annotations

import functools
import os
from typing import Any

from ._native import core


@functools.cache
def solver_types() -> tuple[str, ...]:
    """Caffe's solver type names (SolverParameter.type) the update rules implement."""
    return tuple(core().solver_type_list())


@functools.cache
def lr_policies() -> tuple[str, ...]:
    """Caffe's learning rate policies (SolverParameter.lr_policy) the engine implements."""
    return tuple(core().lr_policy_list())


@functools.cache
def layer_types() -> tuple[str, ...]:
    """Every layer type the engine's registry builds, sorted."""
    return tuple(sorted(core().layer_type_list()))


def net_shapes(path: str | os.PathLike, phase: str = "TRAIN") -> dict[str, Any]:
    """The net of a prototxt as the engine builds it for `phase`, without running
    it and without allocating its activations (Data layers read their first
    record only): {"name", "layers": [{"name", "type", "bottoms", "tops",
    "top_shapes", "param_shapes"}], "params": [{"layer", "layer_index", "index",
    "name", "shape", "count", "lr_mult", "decay_mult", "learns"}]}, params in the
    order ps-worker registers them ("learns": the layer computes the parameter's
    gradient; false for lr_mult 0 and BatchNorm's statistics). A net the engine
    refuses raises its message (ValueError, RuntimeError, FileNotFoundError)
    naming file:line and layer."""
    return core().net_shapes(os.fspath(path), phase)


def key_placement(sizes: list[int], servers: int, chunk_bytes: int
                  ) -> list[tuple[int, int, int, int, int]]:
    """The servers' chunks (common/ps/key_placement.hpp) of parameters with `sizes`
    values: (id, param, offset, length, shard) in chunk id order. Raises the
    engine's error (RuntimeError) for servers < 1, chunk_bytes < 4 or a negative size."""
    return [tuple(c) for c in core().key_placement(list(sizes), servers, chunk_bytes)]
