"""The step gate through pstrain._core.PsClient against a real ps-server process
(server/policies/step_gate.cpp; GATE in docs/wire-protocol.md): a shard started
with --step-gate answers no pull until a driver's set_gate opens it, a worker's
pull for the gate waits (with the GIL released, so this thread goes on) until the
gate rises, wait_for_clock returns once every worker's pushes before the clock
are in, and the errors are exact: a lowered gate, a timed-out wait, and a shard
started without the flag. Every wait is bounded."""
import os
import pathlib
import signal
import threading

import numpy as np
import pytest

caffe = pytest.importorskip("pstrain.caffe")
from ps_train_util import start_ps_server  # noqa: E402

NET = """
name: "mlp"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 } } }
layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 4 dim: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "y" top: "loss" }
"""
JOB_KEY = 91


def start_server(solver: pathlib.Path, *flags: str):
    return start_ps_server(solver, job_key=JOB_KEY, mode="asp", flags=flags)


@pytest.fixture
def solver(tmp_path):
    (tmp_path / "net.prototxt").write_text(NET)
    path = tmp_path / "solver.prototxt"
    path.write_text(f'net: "{tmp_path}/net.prototxt"\nbase_lr: 0.05\nlr_policy: "fixed"\n'
                    f'max_iter: 10\ndisplay: 0\nrandom_seed: 2\n'
                    f'snapshot_prefix: "{tmp_path}/snap"\n')
    return path


def stop(server):
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


class PendingPull:
    """client.pull(t), then wait_pull on a thread: alive while the shard holds it."""

    def __init__(self, client, t):
        client.pull(t)
        self.version = None
        self.thread = threading.Thread(target=self._wait, args=(client,))
        self.thread.start()

    def _wait(self, client):
        self.version = client.wait_pull()

    def waiting_after(self, seconds):
        self.thread.join(timeout=seconds)
        return self.thread.is_alive()

    def join(self):
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return self.version


def test_pulls_wait_for_the_gate_a_driver_opens(solver, tmp_path):
    caffe.set_engine("fast")
    caffe.init_log(1)
    server, endpoint = start_server(solver, "--step-gate")
    try:
        net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TRAIN)
        driver_net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TRAIN)
        worker = caffe._core.PsClient(net, [endpoint], job_key=JOB_KEY, mode="asp", timeout_s=30)
        driver = caffe._core.PsClient(driver_net, [endpoint], job_key=JOB_KEY, mode="asp",
                                      timeout_s=30, role="control")
        assert worker.hello() == 0
        worker.init_push()
        rng = np.random.default_rng(3)

        def iteration(t):
            net.clear_param_diffs()
            net.forward(x=rng.standard_normal((4, 3)).astype(np.float32),
                        y=rng.standard_normal((4, 2)).astype(np.float32))
            net.backward()
            worker.push(t)
            worker.flush()

        first = PendingPull(worker, 0)
        assert first.waiting_after(0.5), "answered before any GATE"
        assert driver.set_gate(2) == (0, 0)  # (slowest worker clock, version)
        assert first.join() == 0
        iteration(0)
        worker.pull(1)
        assert worker.wait_pull() == 1
        iteration(1)
        assert driver.wait_for_clock(2, timeout_s=10) == (2, 2)
        held = PendingPull(worker, 2)
        assert held.waiting_after(0.5), "the pull for the gate was answered"
        with pytest.raises(RuntimeError) as timed_out:
            driver.wait_for_clock(3, timeout_s=0.2)
        assert str(timed_out.value) == (
            f"waited 0.2 s for every worker to reach clock 3; server 0 ({endpoint}) has worker "
            "clocks [2]")
        with pytest.raises(RuntimeError) as lowered:
            driver.set_gate(1)
        assert str(lowered.value) == (
            f"server 0 ({endpoint}) refused a request: GATE 1 is below the current gate 2 "
            "(a step gate only rises)")
        assert held.thread.is_alive()
        assert driver.set_gate(3) == (2, 2)
        assert held.join() == 2
        driver.shutdown()
        assert server.wait(timeout=30) == 0
    finally:
        stop(server)


def test_a_server_without_the_flag_refuses_gate(solver, tmp_path):
    server, endpoint = start_server(solver)
    try:
        net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TRAIN)
        driver = caffe._core.PsClient(net, [endpoint], job_key=JOB_KEY, mode="asp", timeout_s=30,
                                      role="control")
        with pytest.raises(RuntimeError) as refused:
            driver.set_gate(1)
        assert str(refused.value) == (
            f"server 0 ({endpoint}) refused a request: this shard has no step gate (start "
            "ps-server with --step-gate)")
        driver.shutdown()
        assert server.wait(timeout=30) == 0
    finally:
        stop(server)
