"""How the test and bench launcher (ps_job.run_job) ends a job whose process
failed, on the ipc transport with shared-memory rings, the path of the
2-worker ResNet-50 job of bench/gpu_resnet_job.py --cpu that "hung": its
worker 0 was killed by the kernel's OOM killer, the shard then waited for it
(bsp) until its 600 s idle exit, and the launcher until its own 600 s
timeout. Now:

  - a worker killed by SIGKILL mid-iteration, while its pushes go through its
    ring, stops the job at once (JobFailed naming it and the signal) and
    leaves no process behind;
  - a worker that exits non-zero gives the others failure_grace seconds, then
    the job stops naming it;
  - a worker that prints more than a pipe holds (64 KiB) while the launcher
    waits for another one does not stall the job;
  - bench/gpu_resnet_job.py reports a failed job as a RESULT line and goes
    on, and with --cpu skips a job whose workers do not fit in MemAvailable.

The net: DummyData into two 512 x 512 InnerProducts (2 MiB of gradients per
iteration, every weight chunk over 16 KiB, so it goes through the ring) with
rings of 3 MiB, just above one iteration's bytes.
"""
import os
import pathlib
import signal
import tempfile
import threading
import time

import pytest

from ps_job import JobFailed, run_job

NET = """name: "fc_ring"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 3 }
    shape { dim: 4 dim: 512 } shape { dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 512 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 512 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
"""
RING_MB = "3"


def write_solver(tmp: pathlib.Path, max_iter: int, display: int = 100) -> pathlib.Path:
    (tmp / "net.prototxt").write_text(NET)
    solver = tmp / "solver.prototxt"
    solver.write_text(f'net: "{tmp}/net.prototxt"\nbase_lr: 0.001\nmomentum: 0.9\n'
                      f'lr_policy: "fixed"\nmax_iter: {max_iter}\ndisplay: {display}\n'
                      f'snapshot: 0\nsnapshot_after_train: false\nsnapshot_prefix: "{tmp}/snap"\n')
    return solver


def ipc_job(build_dir, solver: pathlib.Path, sockets: str, **kwargs):
    ring = ["--shared-memory-mb", RING_MB]
    worker_args = kwargs.pop("worker_args", {})
    return run_job(build_dir, solver, workers=2, mode="bsp", server_args=ring,
                   worker_args={r: ring + worker_args.get(r, []) for r in range(2)},
                   chunk_bytes=256 << 10, bind=f"ipc://{sockets}/server-{{k}}", **kwargs)


def job_pids(solver: pathlib.Path) -> dict:
    """The pids of the processes whose command line names `solver`: {pid: argv}."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(solver).encode() in argv:
            found[int(entry)] = [a.decode() for a in argv if a]
    return found


def has_ring(pid: int) -> bool:
    """True once the process holds a shared-memory ring (its first ring push)."""
    try:
        return any("pstrain-ring" in os.readlink(f"/proc/{pid}/fd/{fd}")
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_worker_killed_mid_job_stops_the_job_at_once_naming_it(build_dir):
    with tempfile.TemporaryDirectory(prefix="job-kill-") as tmp:
        tmp = pathlib.Path(tmp)
        solver = write_solver(tmp, max_iter=1_000_000)  # never ends on its own
        seen: dict = {}
        killed: dict = {}

        def kill_worker_1_once_its_ring_is_in_use():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                pids = job_pids(solver)
                seen.update(pids)
                rank1 = [p for p, argv in pids.items()
                         if argv[0].endswith("ps-worker") and argv[argv.index("--rank") + 1] == "1"]
                if rank1 and has_ring(rank1[0]):
                    time.sleep(0.5)  # some iterations into the ring path
                    seen.update(job_pids(solver))
                    os.kill(rank1[0], signal.SIGKILL)
                    killed["at"] = time.monotonic()
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_worker_1_once_its_ring_is_in_use)
        killer.start()
        with pytest.raises(JobFailed) as failed:
            ipc_job(build_dir, solver, str(tmp), timeout=150)
        stopped = time.monotonic()
        killer.join()
        assert "at" in killed, "worker 1 never used its ring"
        message = str(failed.value)
        assert message.startswith(
            "worker-1 was killed by SIGKILL (signal 9): nothing in the job sends it; the kernel's "
            "OOM killer does when memory runs out (dmesg names the process); the job stopped: "
            "worker-0, server-0 still ran:\n"), message
        # Before, the job ran until run_job's timeout: worker 0 waits 60 s for the
        # shard, the shard 600 s (--idle-exit-s) for anything.
        assert stopped - killed["at"] < 10, stopped - killed["at"]
        assert len(seen) == 3, seen
        assert not [p for p in seen if alive(p)], "a process of the job was left running"


def test_a_worker_that_fails_gives_the_others_the_grace_then_the_job_stops(build_dir):
    with tempfile.TemporaryDirectory(prefix="job-fail-") as tmp:
        tmp = pathlib.Path(tmp)
        solver = write_solver(tmp, max_iter=1_000_000)
        start = time.monotonic()
        with pytest.raises(JobFailed) as failed:
            # worker 1 refuses its flags and exits 2 at once; worker 0 and the
            # shard would wait for it for 60 s and 600 s.
            ipc_job(build_dir, solver, str(tmp), timeout=40, failure_grace=3,
                    worker_args={1: ["--threads", "0"]})
        took = time.monotonic() - start
        message = str(failed.value)
        assert message.startswith("worker-1 exited with 2; the job stopped: worker-0, server-0 "
                                  "still ran for 3 s after that:\n"), message
        assert "--threads" in message  # worker 1's stderr tail says why
        assert 3 <= took < 30, took
        assert not [p for p in job_pids(solver) if alive(p)]


def test_a_worker_printing_more_than_a_pipe_holds_does_not_stall_the_job(build_dir):
    # 1500 train events of about 300 bytes from each worker: more than the 64 KiB
    # a pipe holds. Read only while the launcher waited on it, worker 1 blocked
    # on its stdout mid-job, and with it the bsp job (worker 0 then failed
    # after its 60 s --timeout-s).
    with tempfile.TemporaryDirectory(prefix="job-pipe-") as tmp:
        tmp = pathlib.Path(tmp)
        solver = write_solver(tmp, max_iter=1500, display=1)
        result = ipc_job(build_dir, solver, str(tmp), timeout=100)
        assert result.returncodes == {"worker-0": 0, "worker-1": 0, "server-0": 0}, result.stderr
        for rank in (0, 1):
            iters = [e["iter"] for e in result.of("train", f"worker-{rank}")]
            assert iters == list(range(1500)), (rank, iters[:5], len(iters))
        done = result.of("done", "server-0")
        assert done and done[0]["shared_memory_bytes_received"] > 0


def resnet_job_module():
    import importlib.util
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gpu_resnet_job",
                                                  root / "bench" / "gpu_resnet_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_resnet_bench_reports_a_failed_job_and_goes_on(capsys):
    bench = resnet_job_module()

    def failing_run_job(*args, **kwargs):
        raise JobFailed("worker-0 was killed by SIGKILL (signal 9): ...")

    class Args:
        cpu = False
        gpu = "0"
        ring_mb = 512
        iterations = 4
        root = build = pathlib.Path("/nonexistent")

    rate = bench.run(Args(), failing_run_job, pathlib.Path("solver.prototxt"), "ipc", 2)
    assert rate == 0.0
    out = capsys.readouterr().out
    assert out.startswith("RESULT transport=ipc workers=2 failed after 0 s: worker-0 was killed "
                          "by SIGKILL (signal 9): ...\n"), out


def test_the_resnet_bench_skips_cpu_workers_that_do_not_fit_in_memory():
    import re
    import subprocess
    import sys
    bench = resnet_job_module()
    # A child of this process peaks at 256 MiB or more: the largest process so far.
    subprocess.run([sys.executable, "-c", "x = bytearray(256 << 20)"], check=True)
    with open("/proc/meminfo") as f:
        available_gb = int(re.search(r"MemAvailable:\s+(\d+)", f.read()).group(1)) * 1024 / 1e9
    assert bench.memory_shortfall(1) == ""  # 1 x 0.3 GB fits
    workers = int(available_gb / 0.25) + 10  # each counted at >= 0.27 GB: more than available
    why = bench.memory_shortfall(workers)
    match = re.fullmatch(rf"{workers} workers need about ([\d.]+) GB \(([\d.]+) GB each, the "
                         r"largest process so far\), ([\d.]+) GB is available: the kernel's OOM "
                         r"killer would take one mid-job \(try --batch 8\)", why)
    assert match, why
    need, each, available = map(float, match.groups())
    assert need > available and each >= 0.26 and abs(need - workers * each) <= workers * 0.05
