"""docs/security.md's promises that tests/python/test_security.py does not cover,
each against the real programs: a resume makes new keys; logs, snapshots and
metrics are owner-only, not just the run folder; every allowed --resume change
is accepted; --overwrite refuses a folder that is not a run folder; a refused
key is shown by its first 8 characters only; ps-server exits with 3 under
nonfinite: stop; a worker answered with ERROR fails with "refused a request".
(A remote host's keys: tests/multihost/test_security_hosts.py.)"""
from __future__ import annotations

import json
import pathlib
import stat
import struct
import subprocess
import time

import pytest
import zmq

from pb_wire import field_bytes, field_varint, fields
from ps_train_util import ROOT, base_job, leftover_processes, write_job
from pstrain import Job, keys, start_server, start_worker
from pstrain import resume as resume_check
from pstrain import runfolder
from pstrain.cli import main as ps_train

SOLVER = ROOT / "configs/nets/lenet_solver.prototxt"
HELLO, HELLO_ACK, INIT_PUSH, INIT_ACK, PULL, PULL_REPLY, PUSH = 1, 2, 3, 4, 5, 6, 7
ERROR = 13
WORKER, SERVER = 1, 2


def header(kind: int, key: int, *, role: int = WORKER, clock: int | None = None,
           values: int = 0, param: str | None = None, text: str | None = None) -> bytes:
    """A pstrain.Header (proto/pstrain.proto) from rank 0, by hand."""
    out = field_varint(1, kind) + field_varint(2, role) + field_varint(3, 0)
    if clock is not None:
        out += field_varint(4, clock)
    if values:
        out += field_bytes(6, field_varint(1, 0) + field_varint(2, values))
    if text is not None:
        out += field_bytes(9, text.encode())
    if param is not None:
        out += field_bytes(10, field_bytes(1, param.encode()) + field_varint(2, values))
    if kind == HELLO:
        out += field_varint(11, 1)
    return out + field_varint(14, key)


def modes(run: pathlib.Path) -> dict[str, int]:
    return {str(p.relative_to(run)): stat.S_IMODE(p.stat().st_mode) for p in run.rglob("*")}


def key_files(run: pathlib.Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run / "keys").iterdir())}


def test_resume_makes_new_keys_and_every_file_of_a_run_is_owner_only(tmp_path, fashion_mnist,
                                                                     capsys):
    (tmp_path / "data").symlink_to(ROOT / "data")
    job = base_job(tmp_path, solver_overrides={"max_iter": 20, "test_interval": 10,
                                               "test_iter": 5, "snapshot": 10, "display": 10})
    path = write_job(tmp_path, job)
    assert ps_train([str(path), "--quiet"]) == 0
    run = tmp_path / "runs" / "tiny"
    first = modes(run)
    # Not just the folder: logs, snapshots, metrics, plots, keys, every file in them.
    for must in ("logs/server-0.log", "logs/worker-1.log", "metrics.jsonl", "summary.json",
                 "snapshots/tiny_iter_20.caffemodel", "snapshots/tiny_iter_20.manifest",
                 "keys/worker-0.key", "job.resolved.yaml"):
        assert must in first, sorted(first)
    loose = {name: oct(mode) for name, mode in first.items() if mode & 0o077}
    assert not loose, loose
    before = key_files(run)
    assert len(before) == 2 * (1 + 1 + 2)      # control, server-0, worker-0, worker-1
    capsys.readouterr()
    assert ps_train([str(path), "--resume", str(run), "--quiet", "--set",
                     "solver_overrides.max_iter=30"]) == 0
    after = key_files(run)
    assert sorted(after) == sorted(before)
    assert [name for name in before if before[name] == after[name]] == []   # all new
    assert json.loads((run / "summary.json").read_text())["iterations"] == 30
    loose = {name: oct(mode) for name, mode in modes(run).items() if mode & 0o077}
    assert not loose, loose
    assert not leftover_processes(str(run))


# Each key resume.ALLOWED names, changed alone, with a value of its own type.
ALLOWED_CHANGES = {
    "name": None, "output": None, "weights": None,     # the run folder's own; checked apart
    "solver_overrides.max_iter": 80, "solver_overrides.snapshot": 20,
    "solver_overrides.snapshot_after_train": False, "solver_overrides.display": 5,
    "solver_overrides.test_interval": 20, "solver_overrides.test_iter": 3,
    "restart.max_worker_restarts": 0, "cluster.threads_per_worker": 2,
    "transport.io_threads": 2,    # runs before auto have 1 in their job.resolved.yaml
    "data": {"prepare": None}, "data.prepare": None, "security.auth": "none",
    "security.nonfinite": "drop",
}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A run folder as ps-train writes it before it starts anything (no training)."""
    tmp = tmp_path_factory.mktemp("resume")
    job = Job.from_yaml(write_job(tmp, base_job(tmp, data={"prepare": "fashion-mnist"})))
    plan = job.plan()
    runfolder.create(plan, resume=False)
    return tmp, plan.run_dir


@pytest.mark.parametrize("key", [k for k, v in ALLOWED_CHANGES.items() if v is not None or
                                 k == "data.prepare"])
def test_every_allowed_resume_change_is_accepted(run_folder, key):
    tmp, run = run_folder
    assert key in resume_check.ALLOWED
    value = ALLOWED_CHANGES[key]
    job = Job.from_yaml(write_job(tmp, base_job(tmp, data={"prepare": "fashion-mnist"}),
                                  f"{key}.yaml"), [f"{key}={json.dumps(value)}"])
    resume_check.check_job(job.config, job.source)        # raises when refused
    resume_check.check_files(job.plan())


def test_every_allowed_key_is_in_the_test():
    assert set(resume_check.ALLOWED) == set(ALLOWED_CHANGES)


def test_a_change_outside_the_allowed_keys_is_refused_by_the_same_check(run_folder):
    tmp, run = run_folder
    job = Job.from_yaml(write_job(tmp, base_job(tmp, data={"prepare": "fashion-mnist"}),
                                  "lr.yaml"), ["solver_overrides.base_lr=0.5"])
    with pytest.raises(Exception, match="solver_overrides.base_lr differs"):
        resume_check.check_job(job.config, job.source)


def test_overwrite_refuses_a_folder_that_is_not_a_run_folder(tmp_path, capsys):
    folder = tmp_path / "runs" / "tiny"
    folder.mkdir(parents=True)
    (folder / "thesis.tex").write_text("months of work\n")
    path = write_job(tmp_path, base_job(tmp_path))
    assert ps_train([str(path), "--overwrite", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"output: {folder} exists and is not a run folder; choose another name or output" \
        in err, err
    assert [p.name for p in folder.iterdir()] == ["thesis.tex"]
    assert (folder / "thesis.tex").read_text() == "months of work\n"


def test_a_refused_key_is_shown_by_its_first_8_characters_only(tmp_path, build_dir):
    folder = keys.make_keys(tmp_path / "keys", servers=1, workers=1)
    log = tmp_path / "server.log"
    server = start_server(SOLVER, workers=1, log_path=log, cwd=tmp_path,
                          extra_args=["--keys", str(folder)])
    stranger_public, stranger_secret = keys.keypair()
    context = zmq.Context()
    try:
        s = context.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.curve_serverkey = keys.read_pair(folder, "server-0")[0].encode()
        s.curve_publickey = stranger_public.encode()
        s.curve_secretkey = stranger_secret.encode()
        s.connect(server.endpoint)
        s.send(b"hello", flags=zmq.NOBLOCK)
        deadline = time.monotonic() + 30
        while "is not one of this job's" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        context.destroy(linger=0)
        server.terminate()
        server.wait(10)
        server.join_output()
    text = log.read_text()
    assert f"key {stranger_public[:8]}... is not one of this job's" in text, text
    assert stranger_public[:9] not in text          # nothing past the 8th character
    assert stranger_secret[:8] not in text


def test_ps_server_exits_with_3_on_a_nan_push_under_nonfinite_stop(tmp_path, build_dir):
    key = 4243
    log = tmp_path / "server.log"
    server = start_server(SOLVER, workers=1, job_key=key, log_path=log, cwd=tmp_path,
                          extra_args=["--nonfinite", "stop"])
    context = zmq.Context()
    try:
        s = context.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, 30000)
        s.connect(server.endpoint)

        def ask(frames: list[bytes]) -> int:
            s.send_multipart(frames)
            return fields(s.recv_multipart()[0])[1][-1]

        assert ask([header(HELLO, key)]) == HELLO_ACK
        assert ask([header(INIT_PUSH, key, values=2, param="w"),
                    struct.pack("<2f", 1.0, 2.0)]) == INIT_ACK
        assert ask([header(PULL, key, clock=0)]) == PULL_REPLY
        assert ask([header(PUSH, key, clock=0, values=2),
                    struct.pack("<2f", 0.5, float("inf"))]) == ERROR
        assert server.wait(30) == 3
    finally:
        context.destroy(linger=0)
        if server.poll() is None:
            server.kill()
            server.wait()
        server.join_output()
    text = log.read_text()
    assert "PUSH from worker 0 for iteration 0: chunk 0 (parameter 0 'w', value 1) holds inf" \
        in text, text


def test_a_worker_answered_with_error_fails_with_refused_a_request(tmp_path, build_dir):
    """A server that answers every request with ERROR (here a ROUTER of the test's):
    the worker stops with one line naming the server and its reason."""
    key = 4244
    net = tmp_path / "net.prototxt"
    net.write_text('layer { name: "x" type: "DummyData" top: "x" dummy_data_param { '
                   'shape { dim: 1 dim: 3 } } }\n'
                   'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" loss_weight: 1 '
                   'inner_product_param { num_output: 1 } }\n')
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{net}"\nbase_lr: 0.1\nlr_policy: "fixed"\nmax_iter: 10\n'
                      f'snapshot: 0\nsnapshot_prefix: "{tmp_path}/s"\n')
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    log = tmp_path / "worker.log"
    worker = start_worker(solver, [f"tcp://127.0.0.1:{port}"], job_key=key, log_path=log,
                          cwd=tmp_path)
    answered = 0
    try:
        deadline = time.monotonic() + 60
        while worker.poll() is None and time.monotonic() < deadline:
            if router.poll(100):
                frames = router.recv_multipart()
                router.send_multipart([frames[0], header(ERROR, key, role=SERVER,
                                                         text="not today")])
                answered += 1
        assert worker.wait(30) == 1, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.join_output()
        context.destroy(linger=0)
    assert answered >= 1
    text = log.read_text()
    assert text.count("\n") == 1, text
    assert f"ps-worker 0: server 0 (tcp://127.0.0.1:{port}) refused a request: not today" \
        in text, text
