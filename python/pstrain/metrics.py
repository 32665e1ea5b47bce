"""metrics.jsonl (one record a line, built from the processes' JSON events) and
summary.json (the run at a glance)."""
from __future__ import annotations

import json
import pathlib
import threading
import time
from typing import Any

# Events that are not metrics: the endpoint line and free-text log lines.
_SKIPPED = {"listening", "log"}


def to_record(event: dict, role: str, rank: int, now: float | None = None) -> dict | None:
    """A metrics record: time (unix seconds), role, rank, iter, event, then the event's values."""
    kind = event.get("event")
    if kind in _SKIPPED:
        return None
    record: dict[str, Any] = {"time": round(now if now is not None else time.time(), 3),
                              "role": role, "rank": rank, "iter": event.get("iter"),
                              "event": kind}
    for k, v in event.items():
        if k not in ("event", "role", "rank", "iter", "time"):
            record[k] = v
    return record


class MetricsLog:
    """Appends records to metrics.jsonl; thread-safe (reader threads call add)."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.records: list[dict] = []
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1)

    def add(self, record: dict) -> None:
        with self._lock:
            self.records.append(record)
            if not self._file.closed:
                self._file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_records(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def run_span(records: list[dict], summary: dict) -> tuple[float, float]:
    """When the whole run began and ended (unix s). A resumed run's metrics.jsonl
    holds every part, but summary.json's started_at and wall_seconds are its last
    part's, so the start is the earlier of started_at and the first record:
    the time of every record then counts from it, >= 0 and continuous across
    resumes (the pauses between the parts included, as the run's own figure
    shows them)."""
    times = [r["time"] for r in records if isinstance(r.get("time"), (int, float))]
    started = summary.get("started_at")
    start = min(times + ([started] if isinstance(started, (int, float)) else []), default=0.0)
    end = max(times, default=start)
    wall = summary.get("wall_seconds")
    if isinstance(started, (int, float)) and isinstance(wall, (int, float)):
        end = max(end, started + wall)
    return start, end


def accuracy_of(record: dict) -> float | None:
    """The test accuracy in a test record (the output blob named like 'accuracy')."""
    for k, v in record.items():
        if "accuracy" in k and isinstance(v, (int, float)):
            return float(v)
    return None


def _bad_messages(server_done: list[dict], server_stats: list[dict]) -> int | None:
    """Messages the servers dropped or refused: the sum over the shards' last
    lines (the final count, per shard), else worker 0's STATS before shutdown
    (already summed over the shards), else None."""
    latest: dict[int, int] = {}
    for r in server_done:
        if isinstance(r.get("bad_messages"), (int, float)):
            latest[r.get("rank")] = int(r["bad_messages"])
    if latest:
        return sum(latest.values())
    counts = [int(r["bad_messages"]) for r in server_stats
              if isinstance(r.get("bad_messages"), (int, float))]
    return counts[-1] if counts else None


def final_test(tests: list[dict]) -> dict | None:
    """The last test done after training began (iteration > 0), or None when there
    is only the iteration-0 test (taken before any training) or none."""
    trained = [r for r in tests if (r.get("iter") or 0) > 0]
    return trained[-1] if trained else None


def accuracy_text(summary: dict) -> str:
    """The summary's test accuracy for the end line, always with its iteration:
    "test accuracy 0.8495 at iteration 500", or what there is instead."""
    acc, it = summary.get("final_test_accuracy"), summary.get("final_test_iteration")
    if acc is not None:
        return f"test accuracy {acc:.4f} at iteration {it}"
    initial = summary.get("initial_test_accuracy")
    if initial is not None:
        return f"no test after training began (iteration-0 test accuracy {initial:.4f})"
    return ""


def summarize(records: list[dict], *, name: str, status: str, mode: str, staleness: int,
              workers: int, servers: int, batch: int, wall_seconds: float,
              train_seconds: float, worker_restarts: int, run_dir: pathlib.Path,
              message: str = "", start_iteration: int = 0) -> dict[str, Any]:
    """REQUIRES: train_seconds is the time of this part of the run alone, which
    began at start_iteration (the resumed checkpoint's, else 0): images_per_second
    counts only the iterations this part trained."""
    def of(kind: str, role: str = "worker", rank: int | None = 0) -> list[dict]:
        return [r for r in records if r.get("event") == kind and r.get("role") == role
                and (rank is None or r.get("rank") == rank)]

    tests = of("test")
    done = of("done")
    train = of("train")
    iterations = max([r.get("iter") or 0 for r in done + train + tests] or [0])
    server_done = of("done", "server", None)
    gaps = [r["staleness_max"] for r in server_done + of("server_stats")
            if isinstance(r.get("staleness_max"), (int, float))]
    staleness_max = int(max(gaps)) if gaps else None
    bad_messages = _bad_messages(server_done, of("server_stats"))
    histogram = next((r.get("staleness_histogram") for r in server_done
                      if r.get("rank") == 0 and r.get("staleness_histogram") is not None), None)
    def server_total(key: str) -> int | None:
        """The sum over the shards' last lines (None when no shard reported it)."""
        latest = {r.get("rank"): int(r[key]) for r in server_done
                  if isinstance(r.get(key), (int, float))}
        return sum(latest.values()) if latest else None
    snapshots = of("snapshot")
    snapshot = snapshots[-1].get("path") if snapshots else None
    deploy = run_dir / "snapshots" / f"{name}_deploy.prototxt"
    images = max(iterations - start_iteration, 0) * workers * batch
    last = final_test(tests)
    initial = next((r for r in tests if (r.get("iter") or 0) == 0), None)
    return {
        "name": name,
        "status": status,
        "message": message,
        "mode": mode,
        "staleness": None if mode == "asp" else staleness,
        "workers": workers,
        "servers": servers,
        "batch_per_worker": batch,
        "iterations": iterations,
        "start_iteration": start_iteration,
        "wall_seconds": round(wall_seconds, 3),
        "train_seconds": round(train_seconds, 3),
        "images_per_second": round(images / train_seconds, 1) if train_seconds > 0 else None,
        "final_test_accuracy": accuracy_of(last) if last else None,
        "final_test_loss": last.get("loss") if last else None,
        "final_test_iteration": last.get("iter") if last else None,
        "initial_test_accuracy": accuracy_of(initial) if initial else None,
        "staleness_max": staleness_max,
        "staleness_histogram": histogram,
        "bad_messages": bad_messages,
        "backup_dropped": server_total("backup_dropped"),
        "bytes_pushed": server_total("bytes_received"),
        "bytes_pulled": server_total("bytes_sent"),
        "snapshot": snapshot,
        "deploy_prototxt": str(deploy) if deploy.exists() else None,
        "worker_restarts": worker_restarts,
        "run_dir": str(run_dir),
    }
