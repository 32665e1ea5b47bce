#!/usr/bin/env python3
"""transport.pull_overlap measured (docs/architecture.md, "Pulls in forward order"): a
bsp job on 3 hosts (network namespaces with sshd, tests/multihost/netns_hosts.py; the
links shaped to RATE each way by bench/host_layout.py's tbf), the shard alone on host 1,
one worker on each of hosts 2 and 3. The net puts its compute first and its bytes last,
as conv nets do: conv 5x5 1->32, conv 5x5 32->64, pool, fc 12544->256, fc 256->10 on
Fashion-MNIST (3.27 M parameters, 13.1 MB; 98 % of them in fc1), batch 32 a worker, one
thread each. In bsp fc1's weights are pushed first and so answered first; the convs'
come last. Off: forward waits for the whole pull. On: the convs' chunks overtake fc1's
queued bytes and the convs' forward runs while fc1's weights still travel.

Rounds alternate off and on (the same hosts, links and data). Prints one JSON line per
run: images/s (rank 0's train events after the first display), the mean pull wait per
iteration (pull_wait_seconds of both workers' train events: the pull time not hidden).
Needs root (namespaces, tc, sshd).

usage: python3 bench/pull_overlap.py [--iters 40] [--rounds 3] [--rate 1gbit]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "multihost"))
sys.path.insert(0, str(ROOT / "bench"))
import netns_hosts  # noqa: E402

NET = """name: "conv_then_fc"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "DATA/train_lmdb" batch_size: BATCH backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 32 kernel_size: 5 pad: 2 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
  convolution_param { num_output: 64 kernel_size: 5 pad: 2 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool" type: "Pooling" bottom: "conv2" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc1" type: "InnerProduct" bottom: "pool" top: "fc1"
  inner_product_param { num_output: 256 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "fc1" top: "fc1" }
layer { name: "fc2" type: "InnerProduct" bottom: "fc1" top: "fc2"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc2" bottom: "label" top: "loss" }
"""
PARAMS = 32 * 25 + 32 + 64 * 32 * 25 + 64 + 12544 * 256 + 256 + 256 * 10 + 10
BATCH = 32
# The checkout's package even beside an editable install of another checkout (whose
# import finder would come first).
RUN_CHECKOUT = ("import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path if "
                "'Redirecting' not in type(f).__name__]; sys.path.insert(0, sys.argv.pop(1)); "
                "sys.argv[0] = 'pstrain'; runpy.run_module('pstrain', run_name='__main__')")


def shape(hosts: netns_hosts.NetnsHosts, rate: str, shard_in: str) -> None:
    """tbf as bench/host_layout.py: on each host's eth0 (its egress) at `rate`, on its
    bridge port (its ingress) at `rate`, the shard host's (host 1) ingress at `shard_in`."""
    burst = str(max(32 * 1024, int(1e9 / 8 * 0.004)))
    for i in range(1, hosts.count + 1):
        for ns, dev, r in ((hosts.ns(i), "eth0", rate),
                           (hosts.head, f"{hosts.prefix}b{i}", shard_in if i == 1 else rate)):
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                            "tbf", "rate", r, "burst", burst, "latency", "50ms"],
                           check=True, capture_output=True, timeout=30)


def write_job(folder: pathlib.Path, hosts, overlap: bool, iters: int, data: pathlib.Path,
              workers: int) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.prototxt").write_text(NET.replace("DATA", str(data))
                                         .replace("BATCH", str(BATCH)))
    (folder / "solver.prototxt").write_text(
        f'net: "{folder}/net.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\n'
        f'display: 5\nmax_iter: {iters}\nsnapshot: 0\nsnapshot_prefix: "{folder}/snap"\n'
        f'random_seed: 7\nsolver_mode: CPU\n')
    # first_slots: the shard takes host 1's only slot, the workers hosts 2, 3, ...
    (folder / "hosts").write_text("".join(f"{hosts.address(i)} slots=1\n"
                                          for i in range(1, workers + 2)))
    name = "on" if overlap else "off"
    job = {"name": name, "solver": str(folder / "solver.prototxt"),
           "solver_overrides": {"max_iter": iters, "display": 5, "snapshot": 0},
           "cluster": {"workers": workers, "servers": 1, "hosts": "hostfile",
                       "hostfile": str(folder / "hosts"), "server_placement": "first_slots",
                       "threads_per_worker": 1, "server_threads": 1},
           "consistency": {"mode": "bsp"}, "engine": "fast",
           "transport": {"host_aggregation": False, "pull_overlap": overlap},
           "output": str(folder / "runs"),
           "remote": {"ssh_options": ["-F", str(hosts.ssh_config)],
                      "workdir": str(folder / "on-{host}" / "{name}")}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def run(hosts, job: pathlib.Path, workers: int, timeout: float) -> dict:
    env = dict(os.environ, PSTRAIN_BUILD_DIR=os.environ.get("PSTRAIN_BUILD_DIR",
                                                            str(ROOT / "build")))
    done = subprocess.run(["ip", "netns", "exec", hosts.head, sys.executable, "-c", RUN_CHECKOUT,
                           str(ROOT / "python"), str(job), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=timeout)
    summary, events = netns_hosts.finished_run(job, done)
    train = [e for e in events if e.get("event") == "train"]
    rank0 = [e for e in train if e.get("rank") == 0]
    first, last = rank0[0], rank0[-1]       # after the first display: warmed up
    steady = (last["iter"] - first["iter"]) * workers * BATCH / (last["time"] - first["time"])
    # pull_wait_seconds: per display window (5 iterations), after the first
    waits = [e["pull_wait_seconds"] / 5 for e in train
             if e["iter"] > first["iter"] and "pull_wait_seconds" in e]
    return {"images_per_s": round(steady, 2),
            "pull_wait_ms_per_iter": round(1000 * statistics.mean(waits), 1),
            "bytes_pulled": summary["bytes_pulled"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-in", default=None, help="the shard host's ingress (default --rate)")
    ap.add_argument("--data", type=pathlib.Path, default=ROOT / "data" / "fashion-mnist")
    a = ap.parse_args()
    why = netns_hosts.unavailable()
    if why:
        print(f"pull_overlap: {why}", file=sys.stderr)
        return 2
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="pull-overlap-"))
    (tmp / "hosts").mkdir()
    hosts = netns_hosts.NetnsHosts(tmp / "hosts", a.workers + 1)
    results: dict[bool, list[dict]] = {False: [], True: []}
    try:
        shape(hosts, a.rate, a.shard_in or a.rate)
        for r in range(a.rounds):
            for overlap in (False, True) if r % 2 == 0 else (True, False):
                job = write_job(tmp / f"round{r}", hosts, overlap, a.iters, a.data.resolve(),
                                a.workers)
                res = run(hosts, job, a.workers, timeout=900)
                res.update(pull_overlap=overlap, round=r, rate=a.rate, shard_in=a.shard_in or a.rate,
                           workers=a.workers,
                           params=PARAMS)
                print(json.dumps(res), flush=True)
                results[overlap].append(res)
    finally:
        hosts.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'pull_overlap':12} {'images/s (each round)':30} {'median':>7} "
          f"{'pull wait ms/iter (median)':>27}")
    for overlap, runs in results.items():
        ips = [x["images_per_s"] for x in runs]
        wait = statistics.median(x["pull_wait_ms_per_iter"] for x in runs)
        print(f"{str(overlap).lower():12} {', '.join(map(str, ips)):30} "
              f"{statistics.median(ips):7.2f} {wait:27.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
