"""pstrain._core.PsClient: a net built in Python trains through a real ps-server
(bsp, one worker) and ends with the weights a local SGDSolver reaches on the
same data (the server applies the same update rule to the same gradients)."""
import os
import pathlib
import signal

import numpy as np
import pytest

caffe = pytest.importorskip("pstrain.caffe")
from ps_train_util import start_ps_server  # noqa: E402

NET = """
name: "mlp"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 8 dim: 4 } } }
layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 8 dim: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "ip1"
        inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "y" top: "loss" }
"""
ITERS = 12


def start_server(solver: pathlib.Path, job_key: int):
    return start_ps_server(solver, job_key=job_key, mode="bsp")


def test_a_python_net_trains_through_a_server_as_a_local_solver_does(tmp_path):
    (tmp_path / "net.prototxt").write_text(NET)
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{tmp_path}/net.prototxt"\nbase_lr: 0.05\nmomentum: 0.9\n'
                      f'lr_policy: "fixed"\nmax_iter: {ITERS}\ndisplay: 0\nrandom_seed: 2\n'
                      f'snapshot_prefix: "{tmp_path}/snap"\n')
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((ITERS, 8, 4)).astype(np.float32)
    ys = rng.standard_normal((ITERS, 8, 2)).astype(np.float32)
    caffe.set_engine("fast")
    caffe.init_log(1)

    local = caffe.SGDSolver(str(solver))
    local.net.save(str(tmp_path / "init.caffemodel"))
    initial = {k: [b.data.copy() for b in v] for k, v in local.net.params.items()}
    for t in range(ITERS):
        local.net.blobs["x"].data[...] = xs[t]
        local.net.blobs["y"].data[...] = ys[t]
        local.step(1)

    server, endpoint = start_server(solver, job_key=77)
    try:
        net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TRAIN,
                        weights=str(tmp_path / "init.caffemodel"))
        client = caffe._core.PsClient(net, [endpoint], job_key=77, timeout_s=60)
        assert client.hello() == 0
        client.init_push()
        for t in range(ITERS):
            client.pull(t)
            client.wait_pull()
            net.clear_param_diffs()
            net.forward(x=xs[t], y=ys[t])
            net.backward()
            client.push(t)
        client.flush()
        client.pull(ITERS)
        assert client.wait_pull() == ITERS
        assert client.traffic["bytes_sent"] > 0
        client.shutdown()
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)

    for name, blobs in local.net.params.items():
        for i, blob in enumerate(blobs):
            remote = net.params[name][i].data
            assert not np.array_equal(blob.data, initial[name][i]), f"{name}/{i} never moved"
            np.testing.assert_allclose(remote, blob.data, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name}/{i}")
