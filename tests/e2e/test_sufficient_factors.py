"""Sufficient factors end to end (ps-worker --sufficient-factors): bsp with 2
workers on an fc-heavy MLP (784 -> 1024 -> 1024 -> 10, batch 16) ends within
1e-5 of the same job pushing dense gradients (momentum and weight decay apply
on the shard to the rebuilt gradients), and the shard receives exactly the
factor bytes; also across 2 shards with chunks ending mid-row, and with
iter_size 2 (the factors of both passes stacked), through ipc shared memory, and
from GPU workers (bench/gpu_check.sh runs that one on a GPU; it skips elsewhere)."""
import json
import re
import subprocess

import pytest

from conftest import ROOT
from ps_job import run_job
from test_ps_training import assert_same, final_model, ok, write_job

WIDE_NET = ROOT / "tests/e2e/nets/mlp_wide.prototxt"
ITERS = 20
BATCH = 16
WORKERS = 2
# Parameters in order: (ip1 weight, bias, ip2 weight, bias, ip3 weight, bias).
IP1, IP2, IP3 = (1024, 784), (1024, 1024), (10, 1024)
ALL_VALUES = 1024 * 784 + 1024 + 1024 * 1024 + 1024 + 10 * 1024 + 10


def server_bytes(result) -> int:
    """Payload bytes the shards received (ShardStats.bytes_received, summed)."""
    done = [e for e in result.events
            if e["source"].startswith("server") and e.get("event") == "done"]
    assert done, "no server reported its statistics"
    return sum(e["bytes_received"] for e in done)


def run_pair(build_dir, data, tmp_path, *, servers=1, chunk_bytes=1 << 20, extra="",
             worker=()):
    """The same bsp job pushing dense gradients and pushing factors (`worker`: more
    ps-worker flags for both)."""
    results, solvers = [], []
    for name, args in (("dense", [*worker]), ("factors", [*worker, "--sufficient-factors"])):
        solver = write_job(tmp_path, name, WIDE_NET, data, BATCH, ITERS, extra=extra)
        results.append(ok(run_job(build_dir, solver, workers=WORKERS, servers=servers,
                                  chunk_bytes=chunk_bytes, worker_args={0: args, 1: args},
                                  timeout=180)))
        solvers.append(solver)
    return results, solvers


def assert_factors_equal_dense(build_dir, runs, solvers, max_rel):
    (dense, factors), (a, b) = runs, solvers
    report = assert_same(build_dir, final_model(a, ITERS), final_model(b, ITERS), max_rel=max_rel)
    assert report["max_abs"] > 0  # a different summation order: not bit-identical
    # Worker 0's init push, then per worker and iteration every gradient:
    init = ALL_VALUES * 4
    assert server_bytes(dense) == init + ITERS * WORKERS * ALL_VALUES * 4
    # ip1 and ip2 as factors, batch x (out + in) floats; ip3 (10 x 1024: 16 x
    # 1034 > 10240) and the biases dense.
    per_push = 4 * (BATCH * (1024 + 784) + BATCH * (1024 + 1024) + 10 * 1024 + 1024 + 1024 + 10)
    assert per_push == 295976
    assert server_bytes(factors) == init + ITERS * WORKERS * per_push
    assert "ip2 (1024 -> 1024): 131072 bytes instead of 4194304" in factors.stderr["worker-1"]


def test_bsp_factors_equal_dense_and_push_the_factor_bytes(build_dir, fashion_mnist, tmp_path):
    runs, solvers = run_pair(build_dir, fashion_mnist, tmp_path)
    assert_factors_equal_dense(build_dir, runs, solvers, max_rel=1e-5)


def cuda_devices(build_dir) -> int:
    """CUDA devices ps-net sees (0 in a build without CUDA)."""
    out = subprocess.run([str(build_dir / "bin/ps-net"), "devices", "--json"],
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout.splitlines()[-1])["cuda_devices"] if out.returncode == 0 else 0


def test_gpu_workers_push_factors_equal_dense(build_dir, fashion_mnist, tmp_path):
    if cuda_devices(build_dir) == 0:
        pytest.skip("no GPU (needs a CUDA build and a CUDA device)")
    # Both workers on GPU 0, the shard on the CPU: the factors come off the device
    # (the layer's top diff and bottom data), the other gradients through the
    # overlapped copies; cuBLAS's products against the shard's rebuild.
    runs, solvers = run_pair(build_dir, fashion_mnist, tmp_path, worker=("--gpu", "0"))
    for result in runs:  # the GPU engine ran (only it speaks of the GPU IPC path)
        assert "GPU IPC pushes off" in result.stderr["worker-0"]
    assert "sufficient factors: off" not in runs[1].stderr["worker-0"]
    assert_factors_equal_dense(build_dir, runs, solvers, max_rel=1e-4)


def test_factors_across_shards_mid_row_chunks_and_iter_size_2(build_dir, fashion_mnist,
                                                              tmp_path):
    # 100000-byte chunks (25000 values: rows of 784 and 1024 end mid-chunk) on
    # 2 shards: each shard gets the factor columns of the rows its chunks touch.
    (dense, factors), (a, b) = run_pair(build_dir, fashion_mnist, tmp_path, servers=2,
                                        chunk_bytes=100000, extra="iter_size: 2\n")
    assert_same(build_dir, final_model(a, ITERS), final_model(b, ITERS), max_rel=1e-5)
    # What each worker says a weight's factors cost (its L columns and all of R
    # per shard holding its chunks), at most 2 shards x 32 samples x (rows + cols):
    said = {m[0]: int(m[1]) for m in re.findall(r"(ip\d) \([^)]*\): (\d+) bytes instead",
                                                factors.stderr["worker-0"])}
    assert sorted(said) == ["ip1", "ip2"]
    assert 4 * 32 * (1024 + 784) < said["ip1"] <= 2 * 4 * 32 * (1024 + 784)
    assert 4 * 32 * (1024 + 1024) < said["ip2"] <= 2 * 4 * 32 * (1024 + 1024)
    # ... is what the shards received.
    per_push = said["ip1"] + said["ip2"] + 4 * (10 * 1024 + 1024 + 1024 + 10)
    assert server_bytes(factors) == 4 * ALL_VALUES + ITERS * WORKERS * per_push


def test_factors_through_ipc_shared_memory_equal_dense_over_tcp(build_dir, fashion_mnist,
                                                                 tmp_path):
    # The two factor frames go through the shared-memory ring (a trailer frame more
    # than the header's two payloads) and arrive whole.
    args = ["--sufficient-factors"]
    dense = write_job(tmp_path, "dense", WIDE_NET, fashion_mnist, BATCH, ITERS)
    ipc = write_job(tmp_path, "ipc", WIDE_NET, fashion_mnist, BATCH, ITERS)
    ok(run_job(build_dir, dense, workers=WORKERS, servers=1, timeout=180))
    result = ok(run_job(build_dir, ipc, workers=WORKERS, servers=1, timeout=180,
                        worker_args={0: args, 1: args}, bind=f"ipc://{tmp_path}/s{{k}}.sock"))
    done = [e for e in result.events if e["source"] == "server-0" and e.get("event") == "done"]
    assert done[0]["shared_memory_bytes_received"] > 0
    assert_same(build_dir, final_model(dense, ITERS), final_model(ipc, ITERS), max_rel=1e-5)
