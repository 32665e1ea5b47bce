"""Messages a server drops reach STATS, metrics.jsonl and summary.json: garbage
sent to the server of a real job (LeNet on Fashion-MNIST, 1 server, 2 workers)
while it trains, over a real ZeroMQ DEALER."""
from __future__ import annotations

import json
import pathlib
import re
import threading
import time

import zmq

from pb_wire import fields, varint
from ps_train_util import ROOT, leftover_processes
from pstrain import ClusterConfig, ConsistencyConfig, Job, JobConfig, SecurityConfig

GARBAGE = 37        # frames that are no header at all
STRANGERS = 5       # well-formed headers carrying another job's key


def stats_request(job_key: int) -> bytes:
    """A pstrain.Header: type STATS (16), role CONTROL (3), sender 0, job_key."""
    return bytes([0x08, 16, 0x10, 3, 0x18, 0]) + bytes([14 << 3]) + varint(job_key)


def server_command_line(run_dir: pathlib.Path) -> str:
    found = [c for c in leftover_processes(str(run_dir)) if "ps-server" in c]
    assert found, "the job's ps-server is not running"
    return found[0]


def test_dropped_messages_reach_stats_metrics_and_summary(tmp_path, fashion_mnist):
    config = JobConfig(
        name="garbage", solver=ROOT / "configs/nets/lenet_solver.prototxt",
        solver_overrides={"max_iter": 60, "test_interval": 0, "snapshot": 0, "display": 10},
        cluster=ClusterConfig(servers=1, workers=2),
        consistency=ConsistencyConfig(mode="bsp"), output=tmp_path / "runs",
        # Without CURVE, so that a stranger's messages reach the server (with
        # CURVE they are refused at the handshake: test_security.py).
        security=SecurityConfig(auth="none"))
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(
        result=Job(config).run(quiet=True, timeout=240)))
    job.start()
    try:
        run_dir = tmp_path / "runs" / "garbage"
        log = run_dir / "logs" / "server-0.log"
        deadline = time.monotonic() + 60
        endpoint = None
        while endpoint is None and time.monotonic() < deadline:
            if log.exists():
                m = re.search(r'"endpoint":"([^"]+)"', log.read_text())
                endpoint = m.group(1) if m else None
            time.sleep(0.05)
        assert endpoint, f"no listening line in {log}"
        job_key = int(re.search(r"--job-key (\d+)", server_command_line(run_dir)).group(1))

        context = zmq.Context()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.setsockopt(zmq.RCVTIMEO, 20000)
        dealer.connect(endpoint)
        try:
            for i in range(GARBAGE):
                dealer.send_multipart([b"\x01\x02 not a header", b"payload %d" % i])
            for _ in range(STRANGERS):
                dealer.send(stats_request(job_key + 1))
            # One connection keeps its order: the answer to this STATS comes
            # after every message above was dropped (none of them is answered).
            dealer.send(stats_request(job_key))
            reply = dealer.recv_multipart()
        finally:
            dealer.close()
            context.term()
        assert len(reply) == 1
        header = fields(reply[0])
        assert header[1] == [16] and header[2] == [2]   # STATS from a SERVER
        stats = fields(header[13][0])
        assert stats.get(5) == [GARBAGE + STRANGERS]    # ShardStats.bad_messages
    finally:
        job.join(300)
    assert not job.is_alive()
    result = outcome["result"]
    assert result.ok, result.summary

    assert result.summary["bad_messages"] == GARBAGE + STRANGERS
    assert json.loads((result.run_dir / "summary.json").read_text())["bad_messages"] == \
        GARBAGE + STRANGERS
    by_event = {(r["role"], r["event"]): r for r in result.metrics
                if r["event"] in ("server_stats", "done")}
    assert by_event[("worker", "server_stats")]["bad_messages"] == GARBAGE + STRANGERS
    assert by_event[("server", "done")]["bad_messages"] == GARBAGE + STRANGERS
    # The server logged the first drops with their reason (all garbage: they
    # came first), then counted the rest in one line: its log stays short.
    text = (result.run_dir / "logs" / "server-0.log").read_text()
    assert text.count("header does not parse") == 10
    assert f"{GARBAGE + STRANGERS - 10} more dropped or refused" in text
    assert "job key mismatch" in text                      # the latest, named in that line
    assert "libprotobuf" not in text
