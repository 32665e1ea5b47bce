"""--dry-run decides a Data layer's database format as the engine does
(worker/data/record_reader.hpp, OpenRecordReader): without data_param.backend
the folder decides (CURRENT and no data.mdb: LevelDB; otherwise LMDB), so
Caffe's examples (no backend, LevelDB folders) and PSTrain's nets (no backend,
LMDB folders) both pass; a named backend is honoured, and a folder of the other
format is refused naming the layer, the source and the backend to set."""
from __future__ import annotations

import pathlib

import pytest

from pstrain import caffe_schema

NET = """name: "n"
layer {{ name: "pairs" type: "Data" top: "data"
  data_param {{ source: "{source}" batch_size: 4 {backend} }} }}
"""

TO_LEVELDB = ("is a LevelDB, not an LMDB (it holds CURRENT and no data.mdb): set "
              "data_param.backend: LEVELDB, or leave it unset to detect the format")
TO_LMDB = ("is an LMDB, not a LevelDB (it holds data.mdb and no CURRENT): set "
           "data_param.backend: LMDB, or leave it unset to detect the format")


@pytest.fixture
def check(tmp_path):
    caffe = caffe_schema.messages()
    assert caffe is not None, "protoc (protobuf-compiler) and proto/caffe.proto are needed"
    (tmp_path / "lmdb").mkdir()
    (tmp_path / "lmdb" / "data.mdb").write_bytes(b"")
    (tmp_path / "leveldb").mkdir()
    (tmp_path / "leveldb" / "CURRENT").write_text("MANIFEST-000001\n")
    (tmp_path / "empty").mkdir()

    def run(source: str, backend: str) -> list[str]:
        net = tmp_path / "net.prototxt"
        net.write_text(NET.format(source=source, backend=f"backend: {backend}" if backend else ""))
        return caffe_schema.check_net(net, caffe)

    return run


@pytest.mark.parametrize("source,backend,problem", [
    ("leveldb", "", None),            # Caffe's examples: no backend, a LevelDB
    ("lmdb", "", None),               # PSTrain's nets: no backend, an LMDB
    ("leveldb", "LEVELDB", None),
    ("lmdb", "LMDB", None),
    ("leveldb", "LMDB", TO_LEVELDB),
    ("lmdb", "LEVELDB", TO_LMDB),
    ("empty", "", "is a folder without data.mdb (not an LMDB)"),
    ("empty", "LMDB", "is a folder without data.mdb (not an LMDB)"),
    ("empty", "LEVELDB", "is a folder without CURRENT (not a LevelDB)"),
])
def test_the_backend_is_decided_as_the_engine_decides(check, tmp_path: pathlib.Path, source,
                                                       backend, problem):
    expected = [] if problem is None else [
        f"{tmp_path / 'net.prototxt'}:2: layer 'pairs': data_param.source 'SRC' {problem}"]
    got = check(str(tmp_path / source), backend)
    assert got == [line.replace("SRC", str(tmp_path / source)) for line in expected]
