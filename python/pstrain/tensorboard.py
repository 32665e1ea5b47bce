"""TensorBoard event files and a CSV of a run's metrics, written without TensorFlow.

`export(records, run_dir)` writes, from the metrics records (metrics.jsonl):

* run_dir/tensorboard/<role>-<rank>/events.out.tfevents.<time>.<host>.pstrain: one
  TensorBoard run per process (worker-0, worker-1, server-0, ...), each scalar tagged
  "<event>/<field>": train/loss, train/lr, train/images_per_second, train/staleness,
  train/bytes_sent, train/bytes_received, test/accuracy, test/loss, and the servers'
  final done/* figures. The step is the record's iteration (a server's: its version).
  `tensorboard --logdir run_dir/tensorboard` shows them.
* run_dir/metrics.csv: every record with an iteration, one row each, one column per
  field.

The event file format is TensorFlow's TFRecord framing of Event protocol buffers:
each record is  uint64 length | uint32 masked_crc32c(length) | data |
uint32 masked_crc32c(data), little-endian, where masked(c) = ((c >> 15 | c << 17) +
0xa282ead8) mod 2^32 and crc32c is CRC-32C (Castagnoli, reflected polynomial
0x82f63b78). The Event messages (tensorflow/core/util/event.proto: wall_time = 1
double, step = 2 int64, file_version = 3 string, summary = 5 Summary; Summary.value = 1
repeated Value; Value.tag = 1 string, simple_value = 2 float) are encoded here by
hand, so the package needs neither TensorFlow nor TensorBoard to write them.
"""
from __future__ import annotations

import csv
import math
import pathlib
import shutil
import socket
import struct
from typing import Iterable

# Fields that say where and when a record is, not what was measured.
_NOT_SCALARS = {"time", "role", "rank", "iter", "event", "version", "path", "source"}


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1   # int64 as protobuf writes it (negative: ten bytes)
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int, *, file_version: str | None = None,
                 scalars: Iterable[tuple[str, float]] = ()) -> bytes:
    """One serialized Event."""
    out = bytearray(_varint(1 << 3 | 1) + struct.pack("<d", wall_time))
    out += _varint(2 << 3 | 0) + _varint(step)
    if file_version is not None:
        out += _length_delimited(3, file_version.encode())
    values = b"".join(
        _length_delimited(1, _length_delimited(1, tag.encode()) + _varint(2 << 3 | 5) +
                          struct.pack("<f", value))
        for tag, value in scalars)
    if values:
        out += _length_delimited(5, values)
    return bytes(out)


def tfrecord(data: bytes) -> bytes:
    """`data` framed as one TFRecord."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data +
            struct.pack("<I", masked_crc32c(data)))


def _scalars(record: dict) -> list[tuple[str, float]]:
    event = record.get("event", "metrics")
    out = []
    for key, value in record.items():
        if key in _NOT_SCALARS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out.append((f"{event}/{key}", float(value)))
    return out


def _step(record: dict) -> int | None:
    for key in ("iter", "version"):
        if isinstance(record.get(key), int):
            return record[key]
    return None


def write_events(records: list[dict], folder: pathlib.Path) -> list[pathlib.Path]:
    """One event file per process under folder/<role>-<rank>/ (folder replaced)."""
    if folder.exists():
        shutil.rmtree(folder)
    by_process: dict[str, list[dict]] = {}
    for r in records:
        if "role" in r and "rank" in r and _step(r) is not None and _scalars(r):
            by_process.setdefault(f"{r['role']}-{r['rank']}", []).append(r)
    host = socket.gethostname()
    written = []
    for process, rows in sorted(by_process.items()):
        start = rows[0].get("time", 0.0)
        path = folder / process / f"events.out.tfevents.{int(start)}.{host}.pstrain"
        path.parent.mkdir(parents=True)
        with path.open("wb") as f:
            f.write(tfrecord(encode_event(start, 0, file_version="brain.Event:2")))
            for r in rows:
                f.write(tfrecord(encode_event(r.get("time", start), _step(r),
                                              scalars=_scalars(r))))
        written.append(path)
    return written


def write_csv(records: list[dict], path: pathlib.Path) -> pathlib.Path:
    """Records that have an iteration (or version), one row each; columns: time, role,
    rank, event, iter, then every measured field in the order first seen."""
    rows = [r for r in records if _step(r) is not None]
    fields = ["time", "role", "rank", "event", "iter"]
    for r in rows:
        for key, value in r.items():
            if key not in fields and not isinstance(value, (list, dict)):
                fields.append(key)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k, "") for k in fields})
    return path


def export(records: list[dict], run_dir: pathlib.Path) -> dict[str, str]:
    """Writes run_dir/tensorboard/ and run_dir/metrics.csv; returns their paths."""
    write_events(records, run_dir / "tensorboard")
    write_csv(records, run_dir / "metrics.csv")
    return {"tensorboard": str(run_dir / "tensorboard"), "csv": str(run_dir / "metrics.csv")}
