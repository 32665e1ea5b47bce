"""Caffe solver and net prototxts: the SolverParameter fields a job may override,
and the generated copies a run trains with (paths made absolute, snapshot_prefix
redirected into the run folder, overrides applied).

The prototxts are edited as text at the top level only, so comments and every
field the package does not touch stay as the user wrote them.
"""
from __future__ import annotations

import dataclasses
import difflib
import pathlib
import re
from typing import Any


# Scalar (and repeated scalar) fields of caffe.SolverParameter (proto/caffe.proto),
# name -> (kind, repeated). Message fields (net_param, train_state, ...) cannot be
# overridden from a job file; edit the solver for those.
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
    "lr_policy": ("string:fixed,step,exp,inv,multistep,poly,sigmoid", False),
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
    "type": ("string:SGD,Nesterov,AdaGrad,RMSProp,AdaDelta,Adam", False),
    "delta": ("float", False),
    "momentum2": ("float", False),
    "rms_decay": ("float", False),
    "debug_info": ("bool", False),
    "snapshot_after_train": ("bool", False),
    "solver_type": ("enum:SGD,NESTEROV,ADAGRAD,RMSPROP,ADADELTA,ADAM", False),
    "layer_wise_reduce": ("bool", False),
    "weights": ("string", True),
}
# Fields the orchestrator owns: overriding them would break the run folder.
RESERVED_FIELDS = {"net", "train_net", "test_net", "snapshot_prefix"}
NET_FIELDS = ("net", "train_net", "test_net")

_TOP_FIELD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*(#.*)?$")
_PATH_FIELD = re.compile(r'^(\s*(?:source|mean_file)\s*:\s*)"([^"]*)"(.*)$')


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
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
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

    def top_level(self) -> list[tuple[int, str, str]]:
        """(line number, field, raw value) of every `field: value` at depth 0."""
        out, depth = [], 0
        for i, line in enumerate(self.lines):
            code = line.split("#", 1)[0]
            if depth == 0:
                m = _TOP_FIELD.match(code)
                if m:
                    out.append((i, m.group(1), m.group(2).strip()))
            depth += code.count("{") - code.count("}")
        return out

    def get(self, name: str) -> list[str]:
        return [_unquote(v) for _, f, v in self.top_level() if f == name]

    def replace(self, name: str, values: list[str]) -> None:
        """Comments out every top-level `name:` line and appends `name: v` for each
        formatted v. Every other line keeps its number, so a message about line N
        of the copy is about line N of the user's file."""
        drop = {i for i, f, _ in self.top_level() if f == name}
        self.lines = [f"# {l.strip()}  (ps-train: replaced below)" if i in drop else l
                      for i, l in enumerate(self.lines)]
        self.lines += [f"{name}: {v}" for v in values]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


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


def net_paths(solver: SolverText) -> list[tuple[str, str]]:
    """(field, path) of every net file the solver names."""
    return [(f, v) for f in NET_FIELDS for v in solver.get(f)]


def data_sources(net_text: str) -> list[str]:
    """The `source:` paths of the net's data layers."""
    return [m.group(2) for line in net_text.splitlines() if (m := _PATH_FIELD.match(line))
            and line.strip().startswith("source")]


def batch_size(net_text: str) -> int:
    """The first `batch_size:` in the net (the TRAIN data layer in Caffe's nets); 0 if none."""
    m = re.search(r"^\s*batch_size\s*:\s*(\d+)", net_text, re.M)
    return int(m.group(1)) if m else 0


def absolute_net_text(net_path: pathlib.Path) -> tuple[str, list[str]]:
    """The net with its data `source` and `mean_file` paths made absolute; also the
    sources that do not exist."""
    missing, out = [], []
    for line in net_path.read_text().splitlines():
        m = _PATH_FIELD.match(line)
        if m:
            found = resolve_beside(m.group(2), net_path.parent)
            if found is None:
                if line.strip().startswith("source"):
                    missing.append(m.group(2))
            else:
                line = f'{m.group(1)}"{found}"{m.group(3)}'
        out.append(line)
    return "\n".join(out) + "\n", missing
