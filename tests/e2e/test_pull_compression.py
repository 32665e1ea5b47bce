"""16-bit on the wire both ways (transport.compression fp16 for pushes,
transport.pull_compression fp16 for pulls), end to end with real ps-server and
ps-worker processes on loopback TCP, on Fashion-MNIST:

* bsp reruns stay bit-identical with both on;
* bsp is still large-batch SGD, on the rounded values: with fp16 pulls (pushes
  float32), W workers of batch b end where one worker of batch W*b ends when it
  pulls in fp16 too (to plain bsp's tolerance, but for the rare value rounded
  one fp16 step apart: see the test), while a float32-pull run ends elsewhere;
* LeNet with fp16 both ways reaches the plain job's test accuracy within 1 point;
* bf16 both ways trains in bsp (reruns bit-identical) and in ssp (a bf16 push
  stopped the shard with an internal error before: its decoder knew no bf16).
"""
import pathlib

import numpy as np

from ps_job import run_job
from test_ps_training import (LENET_NET, SMOOTH_NET, assert_same, compare, final_model, ok,
                              write_job)

FP16_BOTH = ["--compression", "fp16", "--pull-compression", "fp16"]
FP16_PULLS = ["--pull-compression", "fp16"]
BF16_BOTH = ["--compression", "bf16", "--pull-compression", "bf16"]


def each(workers: int, flags: list, extra: dict | None = None) -> dict:
    """worker_args giving every rank `flags` (and rank r also extra[r])."""
    return {r: flags + (extra or {}).get(r, []) for r in range(workers)}


def test_bsp_reruns_with_fp16_both_ways_are_bit_identical(build_dir, fashion_mnist, tmp_path):
    iters = 30
    runs = {name: write_job(tmp_path, name, SMOOTH_NET, fashion_mnist, 16, iters)
            for name in ("a", "b", "plain")}
    jitter = {1: ["--straggle-jitter-ms", "5"]}
    for name in ("a", "b"):
        result = ok(run_job(build_dir, runs[name], workers=3, servers=2, chunk_bytes=8192,
                            worker_args=each(3, FP16_BOTH, jitter)))
    ok(run_job(build_dir, runs["plain"], workers=3, servers=2, chunk_bytes=8192,
               worker_args=jitter))
    assert_same(build_dir, final_model(runs["a"], iters), final_model(runs["b"], iters))
    # The switch is on: the servers sent half the payload bytes of float32 pulls
    # (every reply of the run: 30 steps x 3 workers, plus the first pulls).
    sent = sum(result.of("done", f"server-{k}")[-1]["bytes_sent"] for k in range(2))
    code, report = compare(build_dir, final_model(runs["a"], iters),
                           final_model(runs["plain"], iters))
    assert code == 1 and report["max_rel"] > 1e-4, report
    values = 784 * 64 + 64 + 64 * 10 + 10
    assert sent < 2.2 * values * 3 * (iters + 1), sent  # float32: 4 bytes a value


def blobs(model: pathlib.Path) -> dict:
    from pstrain.caffe.proto import caffe_pb2
    net = caffe_pb2.NetParameter.FromString(model.read_bytes())
    return {(l.name, i): np.array(b.data, np.float64) for l in net.layer
            for i, b in enumerate(l.blobs)}


def disagreement(a: pathlib.Path, b: pathlib.Path) -> tuple[float, float]:
    """(share of values further apart than plain bsp's tolerance, 1e-5 of their
    blob's largest value; the largest difference in fp16 steps of the value)."""
    x, y = blobs(a), blobs(b)
    assert x.keys() == y.keys()
    far = total = 0
    steps = 0.0
    for key, values in x.items():
        d = np.abs(values - y[key])
        far += int((d > 1e-5 * np.abs(values).max()).sum())
        total += d.size
        steps = max(steps, float((d / np.spacing(values.astype(np.float16)).astype(
            np.float64)).max()))
    return far / total, steps


def test_bsp_with_fp16_pulls_is_large_batch_on_the_rounded_values(build_dir, fashion_mnist,
                                                                  tmp_path):
    """What stays equal: 2 workers of 32 and 1 worker of 64, both pulling in fp16
    (pushes float32), agree value for value to plain bsp's tolerance, except where
    the two float32 masters (apart by float sums in another order, ~1e-7) fell on
    either side of an fp16 rounding midpoint: such a value is pulled one fp16 step
    apart. Measured: 17 of 50,890 values, each within one step; against float32
    pulls 82% of the values differ, by up to 44 steps."""
    iters = 50
    one = write_job(tmp_path, "w1", SMOOTH_NET, fashion_mnist, 64, iters)
    two = write_job(tmp_path, "w2", SMOOTH_NET, fashion_mnist, 32, iters)
    plain = write_job(tmp_path, "plain", SMOOTH_NET, fashion_mnist, 64, iters)
    ok(run_job(build_dir, one, workers=1, servers=1, worker_args=each(1, FP16_PULLS)))
    ok(run_job(build_dir, two, workers=2, servers=2, chunk_bytes=16384,
               worker_args=each(2, FP16_PULLS)))
    ok(run_job(build_dir, plain, workers=1, servers=1))
    far, steps = disagreement(final_model(one, iters), final_model(two, iters))
    print(f"fp16 pulls, 2 workers of 32 vs 1 of 64: {far:.2e} of the values apart, "
          f"at most {steps:.2f} fp16 steps")
    assert far < 1e-3 and steps <= 1.5, (far, steps)
    far, steps = disagreement(final_model(one, iters), final_model(plain, iters))
    print(f"control, float32 pulls: {far:.2f} of the values apart, up to {steps:.1f} steps")
    assert far > 0.5 and steps > 4, (far, steps)


def test_lenet_with_fp16_both_ways_reaches_the_plain_accuracy(build_dir, fashion_mnist,
                                                             tmp_path: pathlib.Path):
    iters = 1500
    accuracy = {}
    for name, flags in (("plain", []), ("fp16", FP16_BOTH)):
        solver = write_job(tmp_path, name, LENET_NET, fashion_mnist, 32, iters,
                           test_interval=iters)
        result = ok(run_job(build_dir, solver, workers=2, servers=1, chunk_bytes=65536,
                            timeout=900, worker_args=each(2, flags)))
        accuracy[name] = result.of("test", "worker-0")[-1]["accuracy"]
    print(f"LeNet 2 x 32, {iters} iterations: {accuracy}")
    assert accuracy["plain"] > 0.8, accuracy
    assert abs(accuracy["fp16"] - accuracy["plain"]) <= 0.01, accuracy


def test_bf16_both_ways_trains_in_bsp_and_ssp(build_dir, fashion_mnist, tmp_path):
    iters = 20
    runs = {name: write_job(tmp_path, name, SMOOTH_NET, fashion_mnist, 16, iters)
            for name in ("bsp_a", "bsp_b", "ssp", "plain")}
    for name in ("bsp_a", "bsp_b"):
        ok(run_job(build_dir, runs[name], workers=2, servers=2, chunk_bytes=8192,
                   worker_args=each(2, BF16_BOTH, {1: ["--straggle-jitter-ms", "5"]})))
    result = ok(run_job(build_dir, runs["ssp"], workers=2, mode="ssp", staleness=1,
                        worker_args=each(2, BF16_BOTH)))
    ok(run_job(build_dir, runs["plain"], workers=2, servers=2, chunk_bytes=8192))
    assert_same(build_dir, final_model(runs["bsp_a"], iters), final_model(runs["bsp_b"], iters))
    # Every push was applied (none refused), and bf16's 8-bit mantissa moved the
    # run away from float32's, but not far: 20 steps of a smooth net.
    assert result.of("done", "server-0")[-1]["pushes_applied"] == 2 * iters
    code, report = compare(build_dir, final_model(runs["bsp_a"], iters),
                           final_model(runs["plain"], iters))
    assert code == 1 and 1e-4 < report["max_rel"] < 0.05, report
