"""ps-server and ps-worker configured by environment variables only (a launch
by hand or by another scheduler): PSTRAIN_<FLAG>, torchrun's RANK/WORLD_SIZE
and DMLC_* names; a flag on the command line wins; a bad value names the
variable."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

from ps_train_util import ROOT
from pstrain import programs


def clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PSTRAIN_", "DMLC_")) and k not in ("RANK", "WORLD_SIZE")}
    env.update(values)
    return env


def test_two_workers_configured_by_the_environment(tmp_path, fashion_mnist):
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{ROOT}/configs/nets/lenet_train_test.prototxt"\n'
                      f'base_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\nmax_iter: 4\n'
                      f'display: 2\nsnapshot_after_train: false\nrandom_seed: 1\n')
    server = subprocess.Popen(
        [str(programs.find_program("ps-server"))], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env=clean_env(PSTRAIN_RANK="0", DMLC_NUM_SERVER="1", PSTRAIN_NUM_WORKERS="2",
                      PSTRAIN_BIND="tcp://127.0.0.1:0", PSTRAIN_ADVERTISE="localhost",
                      PSTRAIN_SOLVER=str(solver), PSTRAIN_JOB_KEY="11", PSTRAIN_MODE="bsp",
                      PSTRAIN_IDLE_EXIT_S="60", PSTRAIN_JSON="1"))
    workers = []
    try:
        listening = json.loads(server.stdout.readline())
        assert listening["event"] == "listening"
        endpoint = listening["endpoint"]
        assert endpoint.startswith("tcp://localhost:")     # advertised, not the bound address
        for rank, names in ((0, {"RANK": "0", "WORLD_SIZE": "2"}),
                            (1, {"DMLC_WORKER_ID": "1", "DMLC_NUM_WORKER": "2"})):
            env = clean_env(PSTRAIN_SERVERS=endpoint, PSTRAIN_SOLVER=str(solver),
                            PSTRAIN_JOB_KEY="11", PSTRAIN_MODE="bsp", PSTRAIN_JSON="1",
                            PSTRAIN_ADVERTISE=f"host-{rank}", **names)
            workers.append(subprocess.Popen([str(programs.find_program("ps-worker"))], cwd=ROOT,
                                            env=env, stdout=subprocess.PIPE, text=True))
        for rank, w in enumerate(workers):
            out, _ = w.communicate(timeout=120)
            assert w.returncode == 0, out
            events = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            assert events[0]["message"] == f"worker {rank} on host-{rank}"
            assert [e["iter"] for e in events if e["event"] == "done"] == [4]
        assert server.wait(30) == 0
    finally:
        for p in [server] + workers:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_flag_wins_and_a_bad_value_names_its_variable():
    worker = str(programs.find_program("ps-worker"))
    done = subprocess.run([worker, "--solver", "x", "--servers", "tcp://127.0.0.1:1"],
                          env=clean_env(PSTRAIN_RANK="two"), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == ("ps-worker: environment variable PSTRAIN_RANK='two': the "
                                   "argument ('two') for option 'rank' is invalid")
    # --workers 2 on the command line wins over WORLD_SIZE=8, so rank 5 is out of range.
    done = subprocess.run([worker, "--solver", "x", "--servers", "tcp://127.0.0.1:1",
                           "--workers", "2"], env=clean_env(RANK="5", WORLD_SIZE="8"),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == "ps-worker: --rank must be in [0, 2)"
    # PSTRAIN_RANK wins over RANK.
    done = subprocess.run([worker, "--solver", "x", "--servers", "tcp://127.0.0.1:1"],
                          env=clean_env(PSTRAIN_RANK="3", RANK="0", WORLD_SIZE="2"),
                          capture_output=True, text=True, timeout=30)
    assert done.stderr.strip() == "ps-worker: --rank must be in [0, 2)"


def test_a_shared_memory_size_out_of_range_is_a_usage_error():
    solver = str(ROOT / "configs/nets/lenet_solver.prototxt")
    for program, args, bad in (("ps-server", ["--solver", solver], "-1"),
                               ("ps-worker", ["--solver", "x", "--servers", "ipc:///tmp/x"],
                                "4097")):
        done = subprocess.run([str(programs.find_program(program)), *args,
                               "--shared-memory-mb", bad], env=clean_env(), capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (f"{program}: --shared-memory-mb must be in [0, 4096], "
                                       f"got {bad}")


def test_io_threads_out_of_range_is_a_usage_error():
    solver = str(ROOT / "configs/nets/lenet_solver.prototxt")
    for program, args, bad in (("ps-server", ["--solver", solver], "0"),
                               ("ps-worker", ["--solver", "x", "--servers", "ipc:///tmp/x"],
                                "65")):
        done = subprocess.run([str(programs.find_program(program)), *args, "--io-threads", bad],
                              env=clean_env(), capture_output=True, text=True, timeout=30)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"{program}: --io-threads must be in [1, 64], got {bad}"


def test_ps_server_runs_as_many_io_threads_as_asked():
    """--io-threads N (transport.io_threads): the shard's ZeroMQ context has N I/O threads,
    each named ZMQbg/IO/k once it runs (docs/architecture.md, "I/O threads")."""
    import time
    solver = str(ROOT / "configs/nets/lenet_solver.prototxt")
    for n in (1, 3):
        server = subprocess.Popen([str(programs.find_program("ps-server")), "--solver", solver,
                                   "--io-threads", str(n), "--idle-exit-s", "30", "--json"],
                                  cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, text=True)
        try:
            assert json.loads(server.stdout.readline())["event"] == "listening"
            names: list[str] = []
            for _ in range(200):     # the threads name themselves once they run
                names = []
                for task in pathlib.Path(f"/proc/{server.pid}/task").iterdir():
                    try:
                        names.append((task / "comm").read_text().strip())
                    except OSError:
                        pass
                if sum(x.startswith("ZMQbg/IO") for x in names) >= n:
                    break
                time.sleep(0.01)
            assert sorted(x for x in names if x.startswith("ZMQbg/IO")) == \
                [f"ZMQbg/IO/{k}" for k in range(n)], names
        finally:
            server.kill()
            server.wait()


def test_ps_train_node_runs_the_role_from_the_environment():
    import sys
    cmd = [sys.executable, "-m", "pstrain", "node", "--version"]
    env = clean_env(PYTHONPATH=str(ROOT / "python"))
    for role, program in (("server", "ps-server"), ("worker", "ps-worker")):
        done = subprocess.run(cmd, env=dict(env, PSTRAIN_ROLE=role), capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith(f"{program} "), done
    done = subprocess.run(cmd, env=dict(env, DMLC_ROLE="worker"), capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("ps-worker ")
    done = subprocess.run(cmd, env=dict(env, PSTRAIN_ROLE="scheduler"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("ps-train node: PSTRAIN_ROLE='scheduler'; set PSTRAIN_ROLE "
                                   "to server or worker")
