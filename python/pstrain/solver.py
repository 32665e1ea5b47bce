"""Caffe solver and net prototxts: the SolverParameter fields a job may override,
and the generated copies a run trains with (paths made absolute, snapshot_prefix
redirected into the run folder, overrides applied).

The prototxts are read with protobuf's own tokenizer (prototxt.scan), which knows
each value's field path, line and column; an edit replaces exactly that value's
characters, so comments, every field the package does not touch and every line
number stay as the user wrote them.
"""
from __future__ import annotations

import dataclasses
import difflib
import pathlib
import re
from typing import Any

from . import engine, prototxt


# Scalar (and repeated scalar) fields of caffe.SolverParameter (proto/caffe.proto),
# name -> (kind, repeated). Message fields (net_param, train_state, ...) cannot be
# overridden from a job file; edit the solver for those. A kind "string:engine" or
# "enum:engine" takes its values from the engine (ENGINE_NAMES).
SOLVER_FIELDS: dict[str, tuple[str, bool]] = {
    "net": ("string", False),
    "train_net": ("string", False),
    "test_net": ("string", True),
    "test_iter": ("int", True),
    "test_interval": ("int", False),
    "test_compute_loss": ("bool", False),
    "test_initialization": ("bool", False),
    "base_lr": ("float", False),
    "display": ("int", False),
    "average_loss": ("int", False),
    "max_iter": ("int", False),
    "iter_size": ("int", False),
    "lr_policy": ("string:engine", False),
    "gamma": ("float", False),
    "power": ("float", False),
    "momentum": ("float", False),
    "weight_decay": ("float", False),
    "regularization_type": ("string:L1,L2", False),
    "stepsize": ("int", False),
    "stepvalue": ("int", True),
    "clip_gradients": ("float", False),
    "snapshot": ("int", False),
    "snapshot_prefix": ("string", False),
    "snapshot_diff": ("bool", False),
    "snapshot_format": ("enum:HDF5,BINARYPROTO", False),
    "solver_mode": ("enum:CPU,GPU", False),
    "device_id": ("int", False),
    "random_seed": ("int", False),
    "type": ("string:engine", False),
    "delta": ("float", False),
    "momentum2": ("float", False),
    "rms_decay": ("float", False),
    "debug_info": ("bool", False),
    "snapshot_after_train": ("bool", False),
    "solver_type": ("enum:engine", False),
    "layer_wise_reduce": ("bool", False),
    "weights": ("string", True),
}
# The names the engine accepts for these fields (pstrain._core, engine.py). Caffe's
# legacy solver_type enum names the same solvers upper-cased (SGD, NESTEROV, ...).
ENGINE_NAMES = {
    "lr_policy": engine.lr_policies,
    "type": engine.solver_types,
    "solver_type": lambda: tuple(t.upper() for t in engine.solver_types()),
}
# Fields the orchestrator owns: overriding them would break the run folder.
RESERVED_FIELDS = {"net", "train_net", "test_net", "snapshot_prefix"}
NET_FIELDS = ("net", "train_net", "test_net")

_PATH_FIELDS = ("source", "mean_file")
_DATA_TYPES = ("Data", "DATA")


# A number as YAML 1.2 and protobuf's text format write it. PyYAML follows YAML 1.1,
# which reads 1e-3 (no dot) as a string.
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def normalize_override(name: str, value: Any) -> Any:
    """`value` as the Python value of solver field `name`: numbers written the way
    YAML 1.1 leaves as strings ("1e-3") become floats; anything else is unchanged."""
    kind = SOLVER_FIELDS.get(name, ("", False))[0]

    def one(v: Any) -> Any:
        if kind == "float" and isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
            return float(v)
        return v

    return [one(v) for v in value] if isinstance(value, list) else one(value)


def check_override(name: str, value: Any) -> str | None:
    """Why `value` cannot be solver field `name`, or None when it can."""
    if name not in SOLVER_FIELDS:
        close = difflib.get_close_matches(name, SOLVER_FIELDS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"'{name}' is not a SolverParameter field (see proto/caffe.proto){hint}"
    if name in RESERVED_FIELDS:
        return f"'{name}' is set by ps-train (the run folder); change the solver file instead"
    kind, repeated = SOLVER_FIELDS[name]
    values = value if repeated and isinstance(value, list) else [value]
    if kind.endswith(":engine"):
        kind = kind.replace("engine", ",".join(ENGINE_NAMES[name]()))
    for v in values:
        problem = _check_scalar(kind, v)
        if problem:
            return f"must be {problem}{' (or a list of them)' if repeated else ''}, got {v!r}"
    return None


def _check_scalar(kind: str, v: Any) -> str | None:
    if kind == "int":
        return None if isinstance(v, int) and not isinstance(v, bool) else "an integer"
    if kind == "float":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        return None if ok else "a number"
    if kind == "bool":
        return None if isinstance(v, bool) else "true or false"
    if kind == "string":
        return None if isinstance(v, str) else "a string"
    # "enum:A,B" is a protobuf enum (written bare); "string:a,b" a string field
    # with a closed set of values (written quoted), such as lr_policy.
    names = kind.split(":", 1)[1].split(",")
    return None if v in names else "one of " + ", ".join(names)


def format_value(kind: str, v: Any) -> str:
    if kind == "string" or kind.startswith("string:"):
        return prototxt.quote(str(v))
    if kind == "bool":
        return "true" if v else "false"
    return str(v)


@dataclasses.dataclass
class SolverText:
    """A solver prototxt split into top-level fields (name, raw value) and the rest."""

    path: pathlib.Path
    lines: list[str]

    @staticmethod
    def read(path: pathlib.Path) -> "SolverText":
        return SolverText(path, path.read_text().splitlines())

    def top_level(self) -> list[prototxt.Value]:
        """Every scalar field at depth 0 (never inside net_param { } or another message)."""
        return [v for v in prototxt.scan(self.text()) if len(v.path) == 1]

    def get(self, name: str) -> list[str]:
        return [v.string for v in self.top_level() if v.path[0] == name]

    def replace(self, name: str, values: list[str]) -> None:
        """Blanks every top-level `name: value` (a line holding nothing else is commented
        out) and appends `name: v` for each formatted v. Every other line keeps its
        number and column, so a message about line N of the copy is about line N of
        the user's file."""
        self.remove(name, "replaced below")
        self.lines += [f"{name}: {v}" for v in values]

    def remove(self, name: str, why: str) -> None:
        """Blanks every top-level `name: value`; a line holding nothing else becomes
        a comment ending `(ps-train: <why>)`. Line numbers stay."""
        for v in reversed(self.top_level()):
            if v.path[0] == name:
                self._blank(v, why)

    def _blank(self, v: prototxt.Value, why: str) -> None:
        first, last = v.name.line, v.value.line
        for i in range(first, last + 1):
            line = self.lines[i]
            start = v.name.column if i == first else 0
            stop = v.value.end if i == last else len(line)
            rest = (line[:start] + line[stop:]).split("#", 1)[0]
            if first == last and not rest.strip():
                self.lines[i] = f"# {line.strip()}  (ps-train: {why})"
            else:
                self.lines[i] = line[:start] + " " * (stop - start) + line[stop:]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def resolve_beside(path: str, start: pathlib.Path) -> pathlib.Path | None:
    """A path as written in a prototxt: absolute, or relative to `start` or a folder
    above it (Caffe resolves against the working folder; the repository's prototxts
    name paths from the repository root). The first that exists, else None."""
    p = pathlib.Path(path)
    if p.is_absolute():
        return p if p.exists() else None
    for folder in [start, *start.parents]:
        if (folder / p).exists():
            return (folder / p).resolve()
    return None


def weights_paths(solver: SolverText) -> list[str]:
    """The files of the solver's `weights:` fields in the order Caffe loads them:
    each field in turn, each a comma-separated list (Solver::Init, LoadNetWeights)."""
    return [p.strip() for value in solver.get("weights") for p in value.split(",") if p.strip()]


def net_paths(solver: SolverText) -> list[tuple[str, str]]:
    """(field, path) of every net file the solver names."""
    return [(f, v) for f in NET_FIELDS for v in solver.get(f)]


@dataclasses.dataclass(frozen=True)
class DataSource:
    """A path a net's layer reads: data_param.source (or another *_param's source) or
    transform_param.mean_file. `line` is 1-based."""

    layer: str
    field: str
    path: str
    line: int
    value: prototxt.Value


def data_sources(net_text: str) -> list[DataSource]:
    """The `source:` and `mean_file:` paths of the net's layers, with their layer."""
    values = prototxt.scan(net_text)
    names = {v.blocks[0]: v.string for v in values if v.path[1:] == ("name",)}
    return [DataSource(names.get(v.blocks[0], "?"), v.path[-1], v.string, v.value.line + 1, v)
            for v in values if len(v.path) == 3 and v.path[0] in ("layer", "layers")
            and v.path[1].endswith("_param") and v.path[2] in _PATH_FIELDS]


def batch_size(net_text: str) -> int:
    """data_param.batch_size of the TRAIN-phase data layer (type Data, with
    include { phase: TRAIN } or no phase rule); else the first batch_size in the net;
    0 if none."""
    values = prototxt.scan(net_text)
    layers: dict[int, list[prototxt.Value]] = {}
    for v in values:
        if v.path[0] in ("layer", "layers") and len(v.path) > 1:
            layers.setdefault(v.blocks[0], []).append(v)
    for fields in layers.values():
        field = {v.path[1:]: v.string for v in fields}
        if field.get(("type",)) not in _DATA_TYPES:
            continue
        include = {v.string for v in fields if v.path[1:] == ("include", "phase")}
        exclude = {v.string for v in fields if v.path[1:] == ("exclude", "phase")}
        if (not include or "TRAIN" in include) and "TRAIN" not in exclude:
            size = field.get(("data_param", "batch_size"), "")
            if size.isdigit():
                return int(size)
    first = [v.string for v in values if v.path[-1] == "batch_size" and v.string.isdigit()]
    return int(first[0]) if first else 0


def absolute_net_text(net_path: pathlib.Path) -> tuple[str, list[DataSource]]:
    """The net with its data `source` and `mean_file` paths made absolute (each value
    replaced in place, so every line keeps its number); also the LMDB sources (Data
    layers' data_param) that do not exist. Other layers' sources (HDF5Data's list) are
    left to `ps-net check`, which says what it makes of their layer type."""
    text = net_path.read_text()
    missing, edits = [], []
    for source in data_sources(text):
        found = resolve_beside(source.path, net_path.parent)
        if found is None:
            if source.field == "source" and source.value.path[1] == "data_param":
                missing.append(source)
        else:
            edits.append((source.value.value, prototxt.quote(str(found))))
    lines = prototxt.replace_spans(text.splitlines(), edits)
    return "\n".join(lines) + "\n", missing
