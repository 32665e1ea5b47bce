"""Caffe's message classes in Python, made from proto/caffe.proto, and the checks
--dry-run makes with them.

The classes are built at first use from a descriptor set that protoc (Debian's
protobuf-compiler, no gRPC plugin) writes from caffe.proto: the one of this
checkout (proto/caffe.proto), else the one `cmake --install` put beside the
headers (PREFIX/include/pstrain/proto/caffe.proto, PREFIX/bin holding ps-net). A descriptor set
is plain protobuf data, so this works with any protobuf runtime, where protoc's
generated _pb2 modules tie the two versions together. Without protoc or
caffe.proto, `messages()` returns None and the orchestrator falls back to its
tokenizer-based checks (the programs still parse every file themselves).

`check_solver` and `check_net` parse a user's file with protobuf's text_format
into SolverParameter / NetParameter, so every unknown field, misspelt enum value
and malformed value is reported as `<the user's file>:<line>:<column>: ...`, then
check what a run uses beyond the schema: lr_policy and solver type names (the
engine's own lists, engine.py), and every data layer's LMDB source and mean_file. `check_in_engine` then builds the
nets in the engine (`ps-net check`).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from . import engine, programs

# Layer types that read an LMDB through data_param.
_DATA_LAYERS = ("Data",)


@dataclasses.dataclass(frozen=True)
class CaffeMessages:
    """The message classes the checks use (more through `cls(name)`)."""

    pool: Any
    proto: pathlib.Path

    def cls(self, name: str) -> type:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(f"caffe.{name}"))


def caffe_proto() -> pathlib.Path | None:
    """caffe.proto of this checkout, else of an installed PSTrain; None if neither."""
    candidates = [programs.REPO_ROOT / "proto" / "caffe.proto"]
    ps_net = shutil.which("ps-net")
    if ps_net:
        candidates.append(pathlib.Path(ps_net).resolve().parent.parent / "include" / "pstrain" /
                          "proto" / "caffe.proto")
    return next((c for c in candidates if c.is_file()), None)


@functools.lru_cache(maxsize=None)
def _load(proto: pathlib.Path, protoc: str) -> CaffeMessages | None:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "caffe.desc"
        done = subprocess.run([protoc, f"-I{proto.parent}", f"--descriptor_set_out={out}",
                               str(proto)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or not out.exists():
            return None
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return CaffeMessages(pool=pool, proto=proto)


def messages() -> CaffeMessages | None:
    """Caffe's message classes, or None without protoc or caffe.proto."""
    proto = caffe_proto()
    protoc = os.environ.get("PSTRAIN_PROTOC") or shutil.which("protoc")
    if proto is None or protoc is None:
        return None
    return _load(proto, protoc)


class SchemaError(ValueError):
    """A file that does not hold what a run needs; the message names file and line."""


_POSITION = re.compile(r"^(\d+):(\d+) : ")


def parse(path: pathlib.Path, text: str, message: Any) -> None:
    """text_format.Parse of `text` (the file `path`) into `message`; a ParseError
    becomes SchemaError('<path>:<line>:<column>: <reason>')."""
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as e:
        reason = _POSITION.sub("", str(e))
        line, column = e.GetLine(), e.GetColumn()
        # Newer protobuf quotes the whole line before the reason: the file and line
        # already say where.
        lines = text.splitlines()
        if 0 < line <= len(lines) and reason.startswith(f"'{lines[line - 1]}': "):
            reason = reason[len(lines[line - 1]) + 4:]
        where = f"{path}:{line}:{column}" if line else str(path)
        raise SchemaError(f"{where}: {reason}") from None


def _line_of(text: str, field: str) -> int:
    """1-based line of the first top-level `field:` of a file (1 if not found)."""
    from . import prototxt

    for v in prototxt.scan(text):
        if v.path == (field,):
            return v.value.line + 1
    return 1


def _layer_lines(text: str) -> list[int]:
    """1-based first line of each `layer { }` block's values, in file order."""
    from . import prototxt

    first: dict[int, int] = {}
    for v in prototxt.scan(text):
        if v.path[0] == "layer" and len(v.path) > 1:
            first.setdefault(v.blocks[0], v.name.line + 1)
    return [first[k] for k in sorted(first)]


def check_in_engine(plan: Any) -> str:
    """Builds the plan's TRAIN and TEST nets in the engine with its solver (`ps-net
    check`: every layer type, blob, shape and solver feature as the workers will meet
    them; each data source read to its first record only), from copies of the
    solver and nets as the run writes them. Returns the line --dry-run prints; raises
    JobError (exit 2) with ps-net's message, naming the user's file and line."""
    from .errors import JobError

    if plan.missing_sources:
        return "# net check: not run (data.prepare makes the data sources first)"
    ps_net = programs.find_program("ps-net")
    with tempfile.TemporaryDirectory(prefix="ps-train-check-") as tmp:
        folder = pathlib.Path(tmp)
        solver_text, originals = plan.solver_text, {}
        for copy_name, (original, text) in plan.nets.items():
            (folder / copy_name).write_text(text)
            solver_text = solver_text.replace(str(plan.run_dir / copy_name), str(folder / copy_name))
            originals[str(folder / copy_name)] = str(original)
        solver = folder / "solver.prototxt"
        solver.write_text(solver_text)
        originals[str(solver)] = str(plan.job.solver)
        weights = ",".join(str(w) for w in getattr(plan, "initial_weights", []))
        done = subprocess.run([str(ps_net), "check", "--solver", str(solver)] +
                              (["--weights", weights] if weights else []),
                              capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).removeprefix("ps-net: ")
        for copy, original in sorted(originals.items(), key=lambda kv: -len(kv[0])):
            message = message.replace(copy, original)
        raise JobError(f"{plan.source}: solver: {message}")
    return "# net check: " + done.stdout.strip().replace(str(solver), str(plan.job.solver))


def check_solver(path: pathlib.Path, caffe: CaffeMessages) -> Any:
    """The parsed SolverParameter of the user's solver file; raises SchemaError."""
    text = path.read_text()
    solver = caffe.cls("SolverParameter")()
    parse(path, text, solver)
    policies, types = engine.lr_policies(), engine.solver_types()
    if solver.HasField("lr_policy") and solver.lr_policy not in policies:
        raise SchemaError(f"{path}:{_line_of(text, 'lr_policy')}: lr_policy "
                          f"'{solver.lr_policy}' is not one of {', '.join(policies)}")
    if solver.HasField("type") and solver.type not in types:
        raise SchemaError(f"{path}:{_line_of(text, 'type')}: solver type '{solver.type}' is "
                          f"not one of {', '.join(types)}")
    return solver


def check_net(path: pathlib.Path, caffe: CaffeMessages) -> list[str]:
    """Parses the user's net file (NetParameter) and checks each data layer's source
    and mean_file as the run will resolve them (beside the net, or in a folder above).
    Returns the problems with data files, each '<net>:<line>: layer '<name>': ...';
    raises SchemaError for a file that does not parse."""
    from .solver import data_sources, resolve_beside

    text = path.read_text()
    net = caffe.cls("NetParameter")()
    parse(path, text, net)
    layer_lines = _layer_lines(text)
    problems: list[str] = []
    for source in data_sources(text):
        found = resolve_beside(source.path, path.parent)
        place = f"{path}:{source.line}: layer '{source.layer}'"
        if source.field == "mean_file":
            if found is None:
                problems.append(f"{place}: transform_param.mean_file '{source.path}' not found "
                                f"(make one with: ps-data mean LMDB {source.path})")
            elif not found.is_file():
                problems.append(f"{place}: transform_param.mean_file '{source.path}' is not a "
                                f"file")
    for index, layer in enumerate(net.layer):
        if layer.type not in _DATA_LAYERS or not layer.HasField("data_param"):
            continue
        line = layer_lines[index] if index < len(layer_lines) else 1
        place = f"{path}:{line}: layer '{layer.name}'"
        param = layer.data_param
        if param.batch_size == 0:
            problems.append(f"{place}: data_param.batch_size must be at least 1")
        found = resolve_beside(param.source, path.parent) if param.source else None
        if found is not None and found.is_dir():
            problem = _source_format_problem(found, param)
            if problem:
                problems.append(f"{place}: data_param.source '{param.source}' {problem}")
    return problems


def _source_format_problem(folder: pathlib.Path, param: Any) -> str | None:
    """What is wrong with a Data layer's source folder for its data_param.backend, as
    the engine decides (worker/data/record_reader.hpp, OpenRecordReader): an unset
    backend reads a LevelDB when the folder holds CURRENT and no data.mdb, an LMDB
    otherwise (Caffe would read it as LEVELDB, its default); a named backend is
    honoured, and a folder of the other format is refused."""
    lmdb, leveldb = (folder / "data.mdb").is_file(), (folder / "CURRENT").is_file()
    if not param.HasField("backend"):
        wants_leveldb = leveldb and not lmdb
    else:
        wants_leveldb = param.backend == param.LEVELDB
    if wants_leveldb:
        if lmdb and not leveldb:
            return ("is an LMDB, not a LevelDB (it holds data.mdb and no CURRENT): set "
                    "data_param.backend: LMDB, or leave it unset to detect the format")
        return None if leveldb else "is a folder without CURRENT (not a LevelDB)"
    if leveldb and not lmdb:
        return ("is a LevelDB, not an LMDB (it holds CURRENT and no data.mdb): set "
                "data_param.backend: LEVELDB, or leave it unset to detect the format")
    return None if lmdb else "is a folder without data.mdb (not an LMDB)"
