"""bench/ps_lenet.py's TrainThreadWatch reads the training thread's CPU time,
run-queue wait and preemptions from /proc while a real ps-net runs: the CPU
time it reports must agree with the child's own rusage (the process is
single-threaded but for a data thread that DummyData does not start), and a
process of another name must not be counted. ps-net shares one CPU with a
busy loop, so the scheduler must make it wait and preempt it: the run-queue
wait and the preemptions it reports must show that."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

from pstrain_testing import ROOT, find_build_dir

sys.path.insert(0, str(ROOT / "bench"))
import ps_lenet  # noqa: E402


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_watch_reports_the_training_threads_cpu_time():
    build = find_build_dir(["ps-net"])
    cpu_id = min(os.sched_getaffinity(0))

    def on_that_cpu():
        os.sched_setaffinity(0, {cpu_id})

    before = _cpu_children()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=on_that_cpu)
    try:
        with ps_lenet.TrainThreadWatch() as watch:
            # Not watched: another name.
            subprocess.run(["sleep", "0.2"], check=True, timeout=30)
            out = subprocess.run(
                [str(build / "bin/ps-net"), "time", "--model",
                 str(ROOT / "configs/nets/lenet_bench.prototxt"), "--iterations", "40",
                 "--threads", "1", "--engine", "reference", "--engine-cache", "none"],
                capture_output=True, text=True, timeout=240, preexec_fn=on_that_cpu)
            time.sleep(0.1)
        cpu = _cpu_children() - before   # before the busy loop is reaped: not counted
    finally:
        busy.kill()
        busy.wait()
    assert out.returncode == 0, out.stderr[-500:]
    assert len(watch.last) == 1, watch.last  # ps-net only
    figures = watch.per_iter(40)
    watched_s = figures["train_thread_cpu_ms_per_iter"] * 40 / 1e3
    # The last sample is taken < 50 ms before the process ends.
    assert 0 < watched_s <= cpu + 0.01
    # A sampler starved near the end loses what ran after its last sample.
    assert watched_s >= cpu - 0.5, (watched_s, cpu)
    # Two runnable threads on one CPU take turns: ps-net waited about as long as it
    # ran (a quarter is the floor here), and was preempted many times an iteration.
    cpu_ms = figures["train_thread_cpu_ms_per_iter"]
    assert figures["train_thread_runqueue_ms_per_iter"] > 0.25 * cpu_ms, figures
    assert figures["train_thread_preemptions_per_iter"] >= 1, figures
