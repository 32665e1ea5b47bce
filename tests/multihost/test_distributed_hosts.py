"""pstrain.DistributedSolver across hosts, for real (network-namespace hosts with
their own sshd, netns_hosts.py): a script in the head namespace drives a bsp job
whose workers run on hosts 1 and 2 with a shard beside each (the hostfile
default, cluster.server_placement: per_host; host 3 is a spare), over numpy
arrays the run ships to the hosts (data.memory_data) and starting from the
script's net (initial.caffemodel, shipped too). Its weights equal, bit for bit,
those of the same script with every process on this machine (one shard)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import yaml

from conftest import ROOT

NET = """name: "mlp"
layer { name: "mem" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 16 channels: 1 height: 4 width: 4 } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 12 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""

DRIVER = """
import sys, numpy as np, pstrain, pstrain.caffe as caffe
caffe.init_log(1)
job, arrays, out = sys.argv[1:4]
s = pstrain.DistributedSolver.from_yaml(job)
a = np.load(arrays)
s.set_input_arrays(a["x"], a["y"])
with s:
    s.step(20)
    s.step(s.max_iter - 20)
np.savez(out, **{f"{k}_{i}": b.data for k, v in s.net.params.items() for i, b in enumerate(v)})
print(s.result.summary["status"], flush=True)
"""


def write_job(tmp: pathlib.Path, name: str, hosts=None) -> pathlib.Path:
    (tmp / "mlp.prototxt").write_text(NET)
    (tmp / "solver.prototxt").write_text(
        f'net: "{tmp}/mlp.prototxt"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: "fixed"\n'
        f'max_iter: 40\ndisplay: 10\nrandom_seed: 5\nsnapshot_after_train: false\n')
    job = {"name": name, "solver": str(tmp / "solver.prototxt"), "engine": "fast",
           "output": str(tmp / "runs"),
           "cluster": {"servers": 1, "workers": 2, "worker_devices": "cpu"},
           "consistency": {"mode": "bsp", "staleness": 0}}
    if hosts is not None:
        hostfile = tmp / "hosts"
        hostfile.write_text("".join(f"{hosts.address(i)} slots=1\n" for i in (1, 2, 3)))
        job["cluster"].update(hosts="hostfile", hostfile=str(hostfile))
        del job["cluster"]["servers"]          # per_host's default: one shard a worker host
        job["remote"] = {"ssh_options": ["-F", str(hosts.ssh_config)],
                         "workdir": str(tmp / "on-host-{host}" / "{name}")}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def drive(tmp: pathlib.Path, job: pathlib.Path, out: pathlib.Path, prefix: list[str]) -> str:
    script = tmp / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    done = subprocess.run(prefix + [sys.executable, str(script), str(job), str(tmp / "arrays.npz"),
                                    str(out)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_two_hosts_give_the_weights_of_one(tmp_path, hosts, build_dir):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((200, 1, 4, 4)).astype(np.float32)
    np.savez(tmp_path / "arrays.npz", x=x, y=(x[:, 0, 0, :].argmax(axis=1)).astype(np.float32))
    across = write_job(tmp_path, "across", hosts)
    assert drive(tmp_path, across, tmp_path / "across.npz",
                 ["ip", "netns", "exec", hosts.head]) == "ok"
    summary = json.loads((tmp_path / "runs" / "across" / "summary.json").read_text())
    assert summary["hosts"] == {"server-0": hosts.address(1), "server-1": hosts.address(2),
                                "worker-0": hosts.address(1), "worker-1": hosts.address(2)}
    # The arrays and the starting weights reached the workers' hosts with the run folder.
    for i in (1, 2):
        folder = tmp_path / f"on-host-{hosts.address(i)}" / "across"
        assert (folder / "data" / "memory-0.data.npy").is_file()
        assert (folder / "initial.caffemodel").is_file()
    local = write_job(tmp_path, "local")
    assert drive(tmp_path, local, tmp_path / "local.npz", []) == "ok"
    a, b = np.load(tmp_path / "across.npz"), np.load(tmp_path / "local.npz")
    assert sorted(a.files) == sorted(b.files) == ["ip1_0", "ip1_1", "ip2_0", "ip2_1"]
    for k in a.files:
        assert np.array_equal(a[k], b[k]), k
