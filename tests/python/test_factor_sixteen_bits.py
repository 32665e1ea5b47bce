"""Sufficient factors in 16 bits (transport.compression: fp16 with
transport.sufficient_factors: push or broadcast): the bsp job of the wide MLP
(784-1024-1024-10, batch 16, 2 workers, 1 server) pushes its factors in fp16,
so the shards receive exactly half the factor bytes, computed here from the
shapes; under broadcast the shard relays those fp16 bytes as received, every
replica rebuilds from the same values as the shard (strict check every 4
iterations), and the relay pulls half the bytes too. A rerun is bit-identical,
push and broadcast end bit-identical to each other, within 1e-3 (relative, ps-net
diff) of the same job with float32 factors, and the loss falls."""
from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess

import pytest

from ps_train_util import write_job
from pstrain import Job
from test_factor_broadcast import wide_job

ITERS = 20
WORKERS = 2
BATCH = 16
# Values per parameter: ip1 (1024 x 784), its bias, ip2 (1024 x 1024), its bias,
# ip3 (10 x 1024), its bias. One chunk of ip3 and one of each bias (1 MiB chunks).
ALL_VALUES = 1024 * 784 + 1024 + 1024 * 1024 + 1024 + 10 * 1024 + 10
INIT = 4 * ALL_VALUES  # worker 0's init push: float32, whatever the compression


def half_frame(values: int) -> int:
    """Bytes of a 16-bit frame: two values a 32-bit word."""
    return (values + 1) // 2 * 4


# One worker's push of one iteration. ip1 and ip2 go as factors, L (BATCH x rows)
# and R (BATCH x cols) a frame each; ip3 (10 x 1024: 16 x 1034 values > 10240) and
# the biases go dense, each one chunk.
FACTORS32 = 4 * BATCH * ((1024 + 784) + (1024 + 1024))
DENSE32 = 4 * (10 * 1024 + 1024 + 1024 + 10)
FACTORS16 = (half_frame(BATCH * 1024) + half_frame(BATCH * 784)
             + half_frame(BATCH * 1024) + half_frame(BATCH * 1024))
DENSE16 = half_frame(10 * 1024) + half_frame(1024) + half_frame(1024) + half_frame(10)
# A relayed step, pulled by one worker: both workers' L and R of ip1 and ip2.
RELAY32 = WORKERS * FACTORS32
RELAY16 = WORKERS * FACTORS16


def test_the_byte_counts_of_the_shapes():
    # The worker's log: "ip1 (784 -> 1024): 57856 bytes instead of 1605632", ip2 65536.
    assert FACTORS16 == 57856 + 65536
    assert FACTORS16 * 2 == FACTORS32 and DENSE16 * 2 == DENSE32  # every count is even
    assert FACTORS32 + DENSE32 == 295976  # tests/e2e/test_sufficient_factors.py's per push


def run(tmp_path, data, name: str, factors: str, compression: str) -> dict:
    job = wide_job(tmp_path, name, data)
    job["cluster"]["straggler"] = None
    job["solver_overrides"]["max_iter"] = ITERS
    job["transport"]["sufficient_factors"] = factors
    job["transport"]["compression"] = compression
    job["transport"]["host_aggregation"] = False  # each worker pushes its own factors
    result = Job.from_yaml(write_job(tmp_path, job, f"{name}.yaml")).run(quiet=True, timeout=240)
    assert result.ok, result.summary["message"]
    return result.summary


def digest(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def diff(build_dir, a, b) -> dict:
    out = subprocess.run([str(build_dir / "bin/ps-net"), "diff", str(a), str(b), "--json",
                          "--max-rel", "1e-3"], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1) and out.stdout, out.stderr
    return json.loads(out.stdout)


def losses(run_dir) -> list[float]:
    lines = (pathlib.Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [r["loss"] for r in records
            if r.get("event") == "train" and str(r.get("rank")) == "0"]


def test_fp16_factors_push_and_broadcast(tmp_path, build_dir, fashion_mnist, monkeypatch):
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_INTERVAL", "4")
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_STRICT", "1")
    push32 = run(tmp_path, fashion_mnist, "push32", "push", "none")
    push16 = run(tmp_path, fashion_mnist, "push16", "push", "fp16")
    again = run(tmp_path, fashion_mnist, "again16", "push", "fp16")
    cast16 = run(tmp_path, fashion_mnist, "cast16", "broadcast", "fp16")
    cast32 = run(tmp_path, fashion_mnist, "cast32", "broadcast", "none")

    # Pushed: the init push, then per worker and iteration the factors and the rest.
    pushes = ITERS * WORKERS
    assert push32["bytes_pushed"] == INIT + pushes * (FACTORS32 + DENSE32)
    assert push16["bytes_pushed"] == INIT + pushes * (FACTORS16 + DENSE16)
    assert cast16["bytes_pushed"] == push16["bytes_pushed"]
    assert cast32["bytes_pushed"] == push32["bytes_pushed"]
    # Pulled: push pulls every weight float32 (transport.pull_compression: none),
    # whatever the push's encoding: both workers' pulls for iterations 0..19 and
    # worker 0's for the snapshot at 20.
    pulls = WORKERS * ITERS + 1
    assert push16["bytes_pulled"] == push32["bytes_pulled"] == pulls * 4 * ALL_VALUES
    # Broadcast: every pull but the two of iteration 0 answers ip1 and ip2 with the
    # relay (the verifications every 4 iterations with their values and history
    # too, the same in both jobs): the relay halves.
    relays = pulls - WORKERS
    assert cast32["bytes_pulled"] - cast16["bytes_pulled"] == relays * (RELAY32 - RELAY16)
    assert RELAY32 - RELAY16 == 246784

    log = (pathlib.Path(cast16["run_dir"]) / "logs/worker-1.log").read_text()
    assert "sufficient factors: ip2 (1024 -> 1024): 65536 bytes instead of 2097152" in log
    assert "factor broadcast: ip2/0: 131072 bytes of factors pulled instead of 4194304" in log

    # bsp: a rerun is bit-identical; the relay of the fp16 factors steps every
    # replica as the shard steps (strict checks passed), so broadcast ends where
    # push ends, bit for bit.
    assert digest(again["snapshot"]) == digest(push16["snapshot"])
    assert digest(cast16["snapshot"]) == digest(push16["snapshot"])
    # Against float32 factors (and dense pushes): rounded, close. Measured 2.3e-4.
    report = diff(build_dir, push32["snapshot"], push16["snapshot"])
    assert report["equal"] and 0 < report["max_rel"] < 1e-3, report
    # And it trains: worker 0's loss at the end is well below its start.
    loss = losses(push16["run_dir"])
    assert len(loss) >= 4 and loss[-1] < 0.8 * loss[0], loss
