"""Strangers and rogue peers against real ps-server processes on 127.0.0.1
(docs/security.md): CURVE admits only the job's keys, a key speaks only for
its own rank, STATS and SHUTDOWN come only from the orchestrator's key (or
worker 0's), a pushed NaN never reaches the weights, a hand-started server
without keys refuses SHUTDOWN, and --resume refuses another job without
touching the run folder."""
from __future__ import annotations

import hashlib
import json
import pathlib
import re
import struct
import threading
import time

import pytest
import zmq

from pb_wire import fields, varint
from ps_train_util import ROOT, base_job, leftover_processes, write_job
from pstrain import (ClusterConfig, ConsistencyConfig, Job, JobConfig, JobError, SecurityConfig,
                     TransportConfig, keys, start_server)
from pstrain.cli import main as ps_train

SOLVER = ROOT / "configs/nets/lenet_solver.prototxt"
STATS, SHUTDOWN, PUSH, ERROR = 16, 11, 7, 13
WORKER, SERVER, CONTROL = 1, 2, 3
CONV1_VALUES = 20 * 1 * 5 * 5   # chunk 0 of LeNet: conv1's weights


def header(kind: int, role: int, sender: int, clock: int | None = None,
           chunks: tuple[tuple[int, int], ...] = (), job_key: int = 0) -> bytes:
    """A pstrain.Header (proto/pstrain.proto) encoded by hand."""
    out = bytes([0x08]) + varint(kind) + bytes([0x10]) + varint(role) + bytes([0x18]) + \
        varint(sender)
    if clock is not None:
        out += bytes([0x20]) + varint(clock)
    for cid, length in chunks:
        ref = bytes([0x08]) + varint(cid) + bytes([0x10]) + varint(length)
        out += bytes([0x32]) + varint(len(ref)) + ref
    if job_key:
        out += bytes([14 << 3]) + varint(job_key)
    return out


def nan_push(sender: int, clock: int) -> list[bytes]:
    values = [0.0] * CONV1_VALUES
    values[3] = float("nan")
    return [header(PUSH, WORKER, sender, clock, ((0, CONV1_VALUES),)),
            struct.pack(f"<{CONV1_VALUES}f", *values)]


class Peer:
    """A DEALER to a server: plain, or CURVE with a key pair (public, secret)."""

    def __init__(self, context: zmq.Context, endpoint: str, server_key: str | None = None,
                 pair: tuple[str, str] | None = None):
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        if server_key is not None and pair is not None:
            self.socket.curve_serverkey = server_key.encode()
            self.socket.curve_publickey = pair[0].encode()
            self.socket.curve_secretkey = pair[1].encode()
        self.socket.connect(endpoint)

    def send(self, frames: list[bytes] | bytes) -> None:
        """Never blocks: a peer whose handshake fails has nowhere to send to."""
        try:
            self.socket.send_multipart(frames if isinstance(frames, list) else [frames],
                                       flags=zmq.NOBLOCK)
        except zmq.Again:
            pass

    def answer(self, timeout_s: float) -> list[bytes] | None:
        if self.socket.poll(int(timeout_s * 1000)):
            return self.socket.recv_multipart()
        return None

    def close(self) -> None:
        self.socket.close()


def stats_of(reply: list[bytes]) -> dict[int, list]:
    h = fields(reply[0])
    assert h[1] == [STATS] and h[2] == [SERVER], h
    return fields(h[13][0])


@pytest.fixture
def context():
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def test_keys_are_private_and_new_each_time(tmp_path):
    folder = keys.make_keys(tmp_path / "keys", servers=2, workers=3)
    assert folder.stat().st_mode & 0o777 == 0o700
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(f"{n}.{s}" for n in keys.peer_names(2, 3) for s in ("key", "pub"))
    for p in folder.iterdir():
        assert p.stat().st_mode & 0o777 == 0o600, p
        assert re.fullmatch(r"[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}\n", p.read_text()), p
    first = keys.read_pair(folder, "worker-0")
    keys.make_keys(folder, servers=2, workers=3)
    assert keys.read_pair(folder, "worker-0") != first


def test_server_without_keys_refuses_unauthenticated_control(tmp_path, build_dir, context):
    """A ps-server started by hand, no --keys and no --job-key: SHUTDOWN and STATS
    from anyone are refused, counted and logged; it keeps serving."""
    log = tmp_path / "server.log"
    server = start_server(SOLVER, workers=1, log_path=log, cwd=tmp_path)
    try:
        peer = Peer(context, server.endpoint)
        peer.send(header(SHUTDOWN, CONTROL, 0))
        peer.send(header(STATS, CONTROL, 0))
        peer.send(header(SHUTDOWN, WORKER, 0))
        assert peer.answer(1.5) is None
        assert server.poll() is None, "SHUTDOWN from a stranger stopped the server"
        deadline = time.monotonic() + 30              # all three logged, however slow the machine
        while (log.read_text().count("from an unauthenticated peer") < 3
               and time.monotonic() < deadline):
            time.sleep(0.1)
        peer.close()
    finally:
        server.terminate()
        assert server.wait(10) == 0
        server.join_output()
    text = log.read_text()
    assert "security: none" in text
    assert text.count("from an unauthenticated peer") == 3, text
    assert "interrupted" in text                 # it ended by the signal, not the SHUTDOWN


def test_server_refuses_a_public_interface_without_keys(tmp_path, build_dir):
    import subprocess
    done = subprocess.run([str(build_dir / "bin/ps-server"), "--solver", str(SOLVER), "--bind",
                           "tcp://0.0.0.0:0"], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "needs CURVE (--keys DIR" in done.stderr, done.stderr


def test_curve_server_admits_only_the_jobs_keys(tmp_path, build_dir, context):
    """Strangers (no CURVE, an unknown key) are refused at the handshake; worker 1's
    key can neither speak as worker 0 nor read STATS nor stop the server; the
    orchestrator's key can."""
    folder = keys.make_keys(tmp_path / "keys", servers=1, workers=2)
    server_key = keys.read_pair(folder, "server-0")[0]
    log = tmp_path / "server.log"
    server = start_server(SOLVER, workers=2, log_path=log, cwd=tmp_path,
                          extra_args=["--keys", str(folder)])
    try:
        plain = Peer(context, server.endpoint)
        stranger = Peer(context, server.endpoint, server_key, keys.keypair())
        worker1 = Peer(context, server.endpoint, server_key, keys.read_pair(folder, "worker-1"))
        plain.send(header(STATS, CONTROL, 0))
        stranger.send(header(STATS, CONTROL, 0))
        stranger.send(header(SHUTDOWN, CONTROL, 0))
        worker1.send(header(STATS, WORKER, 1))
        worker1.send(header(SHUTDOWN, WORKER, 1))
        worker1.send(header(SHUTDOWN, CONTROL, 0))     # claims the orchestrator's identity
        worker1.send(nan_push(sender=0, clock=0))      # claims worker 0
        for peer in (plain, stranger, worker1):
            assert peer.answer(0.5) is None
        assert server.poll() is None
        # The server counts refused handshakes once a second, and worker 1's
        # messages come on a connection of their own: ask until both are in
        # (a loaded machine may take a while).
        control = Peer(context, server.endpoint, server_key, keys.read_pair(folder, "control"))
        deadline = time.monotonic() + 30
        while True:
            control.send(header(STATS, CONTROL, 0))
            reply = control.answer(10)
            assert reply is not None, "the orchestrator's key got no STATS answer"
            stats = stats_of(reply)
            if (stats.get(5) == [4] and stats.get(10, [0])[0] >= 2) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert stats[5] == [4]                         # bad_messages: worker 1's four
        assert stats[10][0] >= 2                       # connections_refused: plain, stranger
        assert 11 not in stats or stats[11] == [0]     # the NaN push never reached the check
        control.send(header(SHUTDOWN, CONTROL, 0))
        reply = control.answer(10)
        assert reply is not None and fields(reply[0])[1] == [SHUTDOWN]
        assert server.wait(10) == 0
        for peer in (plain, stranger, worker1, control):
            peer.close()
    finally:
        if server.poll() is None:
            server.kill()
        server.join_output()
    text = log.read_text()
    assert "CURVE on: admitting the 4 public keys" in text
    assert "STATS is accepted only from the orchestrator's key or worker 0's" in text
    assert "sent as control 0 by the key of worker 1" in text
    assert "sent as worker 0 by the key of worker 1" in text
    assert "is not one of this job's" in text          # the stranger's key, named by the ZAP handler
    assert "handshake failed" in text                   # the plain peer
    for pair in keys.peer_names(1, 2):                  # no secret in the log
        assert keys.read_pair(folder, pair)[1] not in text


def _lenet_job(tmp_path: pathlib.Path, name: str, **security) -> JobConfig:
    return JobConfig(
        name=name, solver=SOLVER,
        solver_overrides={"max_iter": 40, "test_interval": 0, "snapshot": 0, "display": 10},
        cluster=ClusterConfig(servers=1, workers=2), consistency=ConsistencyConfig(mode="bsp"),
        # both workers push (the attacks speak as worker 1 to the servers)
        transport=TransportConfig(host_aggregation=False),
        output=tmp_path / "runs", security=SecurityConfig(**security))


def _endpoint(run_dir: pathlib.Path, deadline: float) -> str:
    log = run_dir / "logs" / "server-0.log"
    while time.monotonic() < deadline:
        if log.exists():
            m = re.search(r'"endpoint":"([^"]+)"', log.read_text())
            if m:
                return m.group(1)
        time.sleep(0.02)
    raise AssertionError(f"no listening line in {log}")


def _run_attacked(config: JobConfig, attack) -> tuple:
    """Runs the job on a thread while attack(run_dir, endpoint, over) runs here."""
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(
        result=Job(config).run(quiet=True, timeout=180)))
    job.start()
    try:
        attack(config.run_dir, _endpoint(config.run_dir, time.monotonic() + 60),
               lambda: not job.is_alive())
    finally:
        job.join(200)
    assert not job.is_alive()
    assert not leftover_processes(str(config.run_dir))
    return outcome["result"]


def _final_weights(result) -> bytes:
    assert result.snapshot is not None, result.summary
    return result.snapshot.read_bytes()


def _done_line(run_dir: pathlib.Path) -> dict:
    lines = (run_dir / "logs" / "server-0.log").read_text().splitlines()
    return [json.loads(l) for l in lines if '"event":"done"' in l][-1]


def test_rogues_change_no_weight_and_nan_is_dropped(tmp_path, fashion_mnist, context):
    """A job attacked while it trains by peers without its keys, by worker 1's key
    speaking for worker 0 and for the orchestrator, and by worker 1's key pushing
    NaN (security.nonfinite: drop) ends with weights bit-identical to an
    undisturbed run."""
    calm = Job(_lenet_job(tmp_path, "calm")).run(quiet=True, timeout=180)
    assert calm.ok, calm.summary

    def attack(run_dir: pathlib.Path, endpoint: str, over) -> None:
        folder = run_dir / "keys"
        server_key = keys.read_pair(folder, "server-0")[0]
        peers = [Peer(context, endpoint), Peer(context, endpoint, server_key, keys.keypair())]
        rogue = Peer(context, endpoint, server_key, keys.read_pair(folder, "worker-1"))
        clock = 0
        while not over() and clock < 400:
            for p in peers:
                p.send(nan_push(sender=1, clock=clock % 40))
                p.send(header(SHUTDOWN, CONTROL, 0))
            rogue.send(nan_push(sender=0, clock=clock % 40))   # as worker 0: dropped unread
            rogue.send(header(SHUTDOWN, WORKER, 1))
            rogue.send(nan_push(sender=1, clock=clock % 40))   # its own rank: NaN refused
            clock += 1
            time.sleep(0.01)
        for p in peers + [rogue]:
            p.close()

    attacked = _run_attacked(_lenet_job(tmp_path, "attacked", nonfinite="drop"), attack)
    assert attacked.ok, attacked.summary
    assert _final_weights(attacked) == _final_weights(calm)
    done = _done_line(attacked.run_dir)
    assert done["nonfinite_rejected"] >= 1
    assert done["connections_refused"] >= 2
    assert done["bad_messages"] >= 2
    text = (attacked.run_dir / "logs" / "server-0.log").read_text()
    assert re.search(r"PUSH from worker 1 for iteration \d+: chunk 0 \((parameter 0 '[^']*', )?"
                     r"value 3\) holds nan; refused, nothing applied \(security.nonfinite: drop\)",
                     text), text[-3000:]
    # Drops are logged in full only at first, then counted: the log stays small.
    assert len(text.splitlines()) < 100, len(text.splitlines())
    assert "more dropped or refused" in text


def test_nan_stops_the_job_under_policy_stop(tmp_path, fashion_mnist, context):
    def attack(run_dir: pathlib.Path, endpoint: str, over) -> None:
        folder = run_dir / "keys"
        rogue = Peer(context, endpoint, keys.read_pair(folder, "server-0")[0],
                     keys.read_pair(folder, "worker-1"))
        while not over():
            rogue.send(nan_push(sender=1, clock=5))
            time.sleep(0.05)
        rogue.close()

    result = _run_attacked(_lenet_job(tmp_path, "stopped", nonfinite="stop"), attack)
    assert result.status == "failed"
    message = result.summary["message"]
    assert "PUSH from worker 1 for iteration 5: chunk 0" in message, message
    assert "holds nan; the job stops (security.nonfinite: stop)" in message, message
    assert not list((result.run_dir / "snapshots").glob("*.caffemodel"))


def _hashes(folder: pathlib.Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_resume_refuses_another_job_and_touches_nothing(tmp_path, fashion_mnist, capsys):
    # The job's own solver and net (a tree like the repository's), to edit later.
    nets = tmp_path / "configs" / "nets"
    nets.mkdir(parents=True)
    for name in ("lenet_solver.prototxt", "lenet_train_test.prototxt"):
        (nets / name).write_text((ROOT / "configs" / "nets" / name).read_text())
    (tmp_path / "data").symlink_to(ROOT / "data")
    job = base_job(tmp_path, solver=str(nets / "lenet_solver.prototxt"),
                   solver_overrides={"max_iter": 20, "test_interval": 0, "snapshot": 10,
                                     "display": 10})
    path = write_job(tmp_path, job)
    assert ps_train([str(path), "--quiet"]) == 0
    run = tmp_path / "runs" / "tiny"
    before = _hashes(run)
    capsys.readouterr()
    cases = [("consistency.mode=bsp", "consistency.mode differs: the run has 'ssp', this job 'bsp'"),
             ("cluster.workers=3", "cluster.workers differs: the run has 2, this job 3"),
             ("solver_overrides.base_lr=0.5", "solver_overrides.base_lr differs")]
    for change, expected in cases:
        code = ps_train([str(path), "--resume", str(run), "--set", change])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.count("\n") == 1 and expected in err, err
    assert _hashes(run) == before, "a refused --resume changed the run folder"
    # Another solver file, and the same net file edited since: each named.
    other = tmp_path / "other_solver.prototxt"
    other.write_text((nets / "lenet_solver.prototxt").read_text())
    code = ps_train([str(path), "--resume", str(run), "--set", f"solver={other}"])
    err = capsys.readouterr().err
    assert code == 2 and "solver differs: the run has" in err, err
    net = nets / "lenet_train_test.prototxt"
    text = net.read_text()
    assert "num_output: 20" in text
    net.write_text(text.replace("num_output: 20", "num_output: 21", 1))
    code = ps_train([str(path), "--resume", str(run)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{net} differs from the run's copy net.prototxt: 'num_output: 20' became " \
           f"'num_output: 21'" in err, err
    net.write_text(text)
    assert _hashes(run) == before
    # More iterations are an allowed change.
    assert ps_train([str(path), "--resume", str(run), "--quiet", "--set",
                     "solver_overrides.max_iter=30"]) == 0
    assert json.loads((run / "summary.json").read_text())["iterations"] == 30


def test_security_none_refuses_a_public_interface(tmp_path):
    with pytest.raises(JobError, match=r"transport.interface: 0.0.0.0 can be reached from other "
                                       r"hosts, and security is none"):
        Job.from_yaml(write_job(tmp_path, base_job(
            tmp_path, security="none", transport={"kind": "tcp", "interface": "0.0.0.0"})))
    job = Job.from_yaml(write_job(tmp_path, base_job(tmp_path, security="none")))
    plan = job.plan()
    assert plan.keys_dir is None and "--keys" not in plan.server_command(0, None)
    curve = Job.from_yaml(write_job(tmp_path, base_job(tmp_path))).plan()
    command = curve.server_command(0, None)
    assert "--keys" in command and command[command.index("--job-key") + 1] == "0"


def test_security_section_is_checked(tmp_path):
    def job(**changes):
        return Job.from_yaml(write_job(tmp_path, base_job(tmp_path, **changes))).config

    assert job().security == SecurityConfig("curve", "stop")
    assert job(security="none").security == SecurityConfig("none", "stop")
    assert job(security={"nonfinite": "drop"}).security == SecurityConfig("curve", "drop")
    for bad, message in (("tls", "security: must be curve, none or a mapping"),
                         ({"nonfinite": "ignore"},
                          "security.nonfinite: must be one of stop, drop, got 'ignore'"),
                         ({"auth": "curve", "key": "x"}, "unknown key 'security.key'")):
        with pytest.raises(JobError, match=re.escape(message)):
            job(security=bad)
    plan = Job.from_yaml(write_job(tmp_path, base_job(
        tmp_path, security={"nonfinite": "drop"}))).plan()
    command = plan.server_command(0, None)
    assert command[command.index("--nonfinite") + 1] == "drop"


def test_ipc_job_without_curve_keeps_its_sockets_owner_only(tmp_path, fashion_mnist, capsys):
    """security: none over ipc: the servers' Unix sockets live in <run>/sockets (0700),
    which another local user cannot search, and ps-train says so instead of warning
    that any local user can connect."""
    (tmp_path / "data").symlink_to(ROOT / "data")
    job = base_job(tmp_path, security="none", transport={"kind": "ipc"},
                   solver_overrides={"max_iter": 20, "test_interval": 0, "snapshot": 0,
                                     "display": 10})
    assert ps_train([str(write_job(tmp_path, job))]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    sockets = tmp_path / "runs" / "tiny" / "sockets"
    assert "security: none: no CURVE; servers listen on Unix sockets in " + str(sockets) in text
    assert "(mode 0700: only this user can connect)" in text
    assert "any local user can connect" not in text
    assert sockets.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "runs" / "tiny").stat().st_mode & 0o077 == 0
