"""TensorBoard event files written without TensorFlow, read back with TensorBoard's own
reader (event_accumulator), and the CSV export."""
from __future__ import annotations

import csv
import pathlib

import pytest

from pstrain import tensorboard

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")

RECORDS = [
    {"time": 100.0, "role": "worker", "rank": 0, "iter": 0, "event": "train", "loss": 2.5,
     "lr": 0.01, "images_per_second": 640.0, "staleness": 0, "bytes_sent": 1000},
    {"time": 100.5, "role": "worker", "rank": 1, "iter": 0, "event": "train", "loss": 2.25,
     "lr": 0.01, "images_per_second": 600.0, "staleness": 1, "bytes_sent": 1000},
    {"time": 101.0, "role": "worker", "rank": 0, "iter": 10, "event": "train", "loss": 1.5,
     "lr": 0.005, "images_per_second": 700.0, "staleness": 2, "bytes_sent": 11000},
    {"time": 101.5, "role": "worker", "rank": 0, "iter": 10, "event": "test", "accuracy": 0.75,
     "loss": 0.8},
    {"time": 102.0, "role": "server", "rank": 0, "event": "done", "version": 20,
     "pushes_applied": 40, "staleness_max": 3, "bad_messages": 0,
     "staleness_histogram": [30, 10]},
    {"time": 102.5, "role": "worker", "rank": 0, "iter": 10, "event": "snapshot", "path": "x"},
]


def load(folder: pathlib.Path) -> event_accumulator.EventAccumulator:
    acc = event_accumulator.EventAccumulator(str(folder))
    acc.Reload()
    return acc


def test_crc32c_check_value():
    assert tensorboard.crc32c(b"123456789") == 0xE3069283   # CRC-32C's published check value
    assert tensorboard.crc32c(b"") == 0


def test_tensorboards_reader_sees_every_scalar_per_process(tmp_path):
    files = tensorboard.write_events(RECORDS, tmp_path / "tb")
    assert sorted(p.parent.name for p in files) == ["server-0", "worker-0", "worker-1"]
    worker0 = load(tmp_path / "tb" / "worker-0")
    tags = set(worker0.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/images_per_second", "train/staleness",
            "train/bytes_sent", "test/accuracy", "test/loss"} <= tags
    loss = worker0.Scalars("train/loss")
    assert [(e.step, e.value, e.wall_time) for e in loss] == [(0, 2.5, 100.0), (10, 1.5, 101.0)]
    assert [(e.step, e.value) for e in worker0.Scalars("train/lr")] == \
        [(0, pytest.approx(0.01)), (10, pytest.approx(0.005))]
    assert [(e.step, e.value) for e in worker0.Scalars("test/accuracy")] == [(10, 0.75)]
    worker1 = load(tmp_path / "tb" / "worker-1")
    assert [(e.step, e.value) for e in worker1.Scalars("train/staleness")] == [(0, 1.0)]
    server = load(tmp_path / "tb" / "server-0")
    assert [(e.step, e.value) for e in server.Scalars("done/staleness_max")] == [(20, 3.0)]
    assert [(e.step, e.value) for e in server.Scalars("done/pushes_applied")] == [(20, 40.0)]
    # Written again, the folder is replaced, not appended to.
    tensorboard.write_events(RECORDS[:1], tmp_path / "tb")
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == ["worker-0"]


def test_tensorboard_checks_our_checksums(tmp_path):
    """TensorBoard's loader reads both records of an intact file and stops at a record
    whose payload no longer matches its CRC-32C."""
    from tensorboard.backend.event_processing import event_file_loader

    def count(path: pathlib.Path) -> int:
        loader = event_file_loader.RawEventFileLoader(str(path), detect_file_replacement=False)
        return sum(1 for _ in loader.Load())

    (path,) = tensorboard.write_events(RECORDS[:1], tmp_path / "tb")
    assert count(path) == 2   # file_version, then the scalars
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF   # inside the last record's payload
    path.write_bytes(bytes(data))
    assert count(path) == 1


def test_csv_export(tmp_path):
    path = tensorboard.write_csv(RECORDS, tmp_path / "metrics.csv")
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 6
    assert list(rows[0])[:5] == ["time", "role", "rank", "event", "iter"]
    assert rows[2]["loss"] == "1.5" and rows[2]["iter"] == "10" and rows[2]["rank"] == "0"
    assert rows[3]["accuracy"] == "0.75" and rows[3]["lr"] == ""
    assert rows[4]["version"] == "20" and "staleness_histogram" not in rows[0]


def test_ps_train_export_writes_a_run_folders_files(tmp_path, capsys):
    import json

    from pstrain.cli import main

    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS) +
                                            '{"truncated": \n')   # a line still being written
    assert main(["export", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (f"wrote {tmp_path / 'tensorboard'} and "
                                       f"{tmp_path / 'metrics.csv'}\n")
    acc = load(tmp_path / "tensorboard" / "worker-0")
    assert [e.value for e in acc.Scalars("train/loss")] == [2.5, 1.5]
    assert len((tmp_path / "metrics.csv").read_text().splitlines()) == 7
    assert main(["export", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err == (f"ps-train: {tmp_path / 'nothing'}: not a run folder "
                                       f"(no metrics.jsonl)\n")
