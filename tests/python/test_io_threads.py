"""transport.io_threads (docs/architecture.md, "I/O threads"): each worker's ZeroMQ
context gets that many I/O threads and its connection to shard k is pinned to thread
k mod n. Only timing may change: the fc-heavy MLP in bsp on 2 shards with 2 workers ends
bit for bit where the same job with one I/O thread ends (the flag reaching every worker
is tests/python/test_config.py's; that the pinning spreads the connections,
tests/cpp/transport_test.cpp's ConnectionsSpreadOverTheContextsIoThreads)."""
from __future__ import annotations

import pathlib

from ps_train_util import write_job
from pstrain import Job
from test_factor_broadcast import digest, wide_job


def run(tmp_path, data, name: str, io_threads: int) -> dict:
    job = wide_job(tmp_path, name, data)
    job["cluster"]["straggler"] = None
    job["cluster"]["servers"] = 2
    job["solver_overrides"]["max_iter"] = 12
    job["transport"]["host_aggregation"] = False
    job["transport"]["io_threads"] = io_threads
    result = Job.from_yaml(write_job(tmp_path, job, f"{name}.yaml")).run(quiet=True, timeout=300)
    assert result.ok, result.summary["message"]
    return result.summary


def test_io_threads_change_no_float(tmp_path, fashion_mnist):
    one = run(tmp_path, fashion_mnist, "one", 1)
    two = run(tmp_path, fashion_mnist, "two", 2)
    assert digest(two["snapshot"]) == digest(one["snapshot"])
    assert two["bytes_pushed"] == one["bytes_pushed"] > 0
    resolved = (pathlib.Path(two["run_dir"]) / "job.resolved.yaml").read_text()
    assert "io_threads: 2" in resolved
