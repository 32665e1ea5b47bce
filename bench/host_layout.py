#!/usr/bin/env python3
"""Issue 32's host switches measured: a bandwidth-bound bsp job on 4 hosts (network
namespaces with sshd, tests/multihost/netns_hosts.py) whose links are shaped to
1 Gbit/s each way (tbf on both ends of every host's veth; --rate-mbit: another
rate), through ps-train with a hostfile. An MLP 784-4096-2048-10 (11.6 M parameters,
46.5 MB of float32) on Fashion-MNIST, 2 workers a host (8 in all), batch 16 each.
Three layouts:

  today       cluster.server_placement first_slots, 1 server (host 1's first slot),
              transport.host_aggregation false
  per_host    a server beside the workers of each host (4), no aggregation
  per_host+agg  the same, and one push and one pull per host

Prints one JSON line per run (images/s from the train events after the first
display, bytes pushed) and a table. Needs root (namespaces, tc, sshd).

--predict JSON: no measuring; the cost model's figures for the three layouts
(python/pstrain/costmodel.py, docs/scaling.md), with the CPU constants of a
bench/scaling_validate.py run (its "calibration") and the layer times of `ps-net time`
on the MLP here (one thread).

--calibrate JSON_OUT: no job; E8's constants on the layouts' own path (ps-bench on host 1,
its server on host 2, the links shaped, CURVE on as the jobs run), each thread's CPU and
the whole machine's busy CPU per byte; --predict ... --cpu JSON_OUT then uses them for E8
(the path keeps the validation run's c_s and c_w, CURVE as E14's cap).

--exchange JSON (with --predict): E15, each layout's links at the share of their rate that
bench/exchange_probe.py measured for its pushers a host. --sysctl KEY=VALUE: set in every
host's namespace before the jobs (e.g. net.ipv4.tcp_congestion_control=cubic).

usage: python3 bench/host_layout.py [--iters 14] [--rounds 2] [--layouts today,...]
           [--rate-mbit 1000] [--sysctl KEY=VALUE]
       python3 bench/host_layout.py --predict bench/data/scaling_validation_e2e_factors.json
              [--cpu bench/data/host_layout_cpu_veth_curve.json]
              [--exchange bench/data/exchange_probe_200mbit.json --rate-mbit 200]
       python3 bench/host_layout.py --calibrate bench/data/host_layout_cpu_veth_curve.json
              [--rounds 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "multihost"))
sys.path.insert(0, str(ROOT / "bench"))
import netns_hosts  # noqa: E402
import scaling_cpu  # noqa: E402
import scaling_validate  # noqa: E402

NET = """name: "mlp_wide"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "DATA/train_lmdb" batch_size: BATCH backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 4096 weight_filler { type: "xavier" } } }
layer { name: "tanh1" type: "TanH" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 2048 weight_filler { type: "xavier" } } }
layer { name: "tanh2" type: "TanH" bottom: "ip2" top: "ip2" }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
"""
PARAMS = 784 * 4096 + 4096 + 4096 * 2048 + 2048 + 2048 * 10 + 10
HOSTS, PER_HOST, BATCH = 4, 2, 16
CURVE_CALIBRATION = ROOT / "bench/data/scaling_calibration_gpu.json"   # E14's c_c
LAYOUTS = {
    "today": {"server_placement": "first_slots", "servers": 1, "host_aggregation": False},
    "per_host": {"server_placement": "per_host", "servers": None, "host_aggregation": False},
    "per_host+agg": {"server_placement": "per_host", "servers": None, "host_aggregation": True},
}


def burst_bytes(rate_mbit: int) -> int:
    """The tbf burst `shape` sets: 4 ms of the rate, at least 32 KiB."""
    return max(32 * 1024, int(rate_mbit * 1e6 / 8 * 0.004))


def shape(hosts: netns_hosts.NetnsHosts, rate_mbit: int = 1000) -> None:
    """tbf on each host's eth0 (its egress) and on its bridge port (its ingress)."""
    burst, rate = str(burst_bytes(rate_mbit)), f"{rate_mbit}mbit"
    for i in range(1, hosts.count + 1):
        for ns, dev in ((hosts.ns(i), "eth0"), (hosts.head, f"{hosts.prefix}b{i}")):
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                            "tbf", "rate", rate, "burst", burst, "latency", "50ms"],
                           check=True, capture_output=True, timeout=30)


def set_sysctls(hosts: netns_hosts.NetnsHosts, settings: list[str]) -> None:
    """`sysctl -w KEY=VALUE` in every host's namespace (the net.* keys are per namespace)."""
    for i in range(1, hosts.count + 1):
        for setting in settings:
            subprocess.run(["ip", "netns", "exec", hosts.ns(i), "sysctl", "-q", "-w", setting],
                           check=True, capture_output=True, timeout=30)


def write_job(tmp: pathlib.Path, hosts, layout: str, iters: int, data: pathlib.Path) -> pathlib.Path:
    folder = tmp / layout.replace("+", "_")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.prototxt").write_text(NET.replace("DATA", str(data))
                                         .replace("BATCH", str(BATCH)))
    (folder / "solver.prototxt").write_text(
        f'net: "{folder}/net.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\n'
        f'display: 2\nmax_iter: {iters}\nsnapshot: 0\nsnapshot_prefix: "{folder}/snap"\n'
        f'random_seed: 7\nsolver_mode: CPU\n')
    s = LAYOUTS[layout]
    # first_slots: host 1 also takes the server's slot
    slots = {1: PER_HOST + (1 if s["server_placement"] == "first_slots" else 0)}
    (folder / "hosts").write_text("".join(f"{hosts.address(i)} slots={slots.get(i, PER_HOST)}\n"
                                          for i in range(1, HOSTS + 1)))
    cluster = {"workers": HOSTS * PER_HOST, "hosts": "hostfile",
               "hostfile": str(folder / "hosts"), "server_placement": s["server_placement"],
               "threads_per_worker": 1}
    if s["servers"] is not None:
        cluster["servers"] = s["servers"]
    job = {"name": layout.replace("+", "_"), "solver": str(folder / "solver.prototxt"),
           "solver_overrides": {"max_iter": iters, "display": 2, "snapshot": 0},
           "cluster": cluster, "consistency": {"mode": "bsp"}, "engine": "fast",
           "transport": {"host_aggregation": s["host_aggregation"]},
           "output": str(folder / "runs"),
           "remote": {"ssh_options": ["-F", str(hosts.ssh_config)],
                      "workdir": str(folder / "on-{host}" / "{name}")}}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def program_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds so far (user + system, /proc/PID/stat) of every ps-worker and ps-server."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            name = pathlib.Path(f"/proc/{entry.name}/comm").read_text().strip()
        except OSError:
            continue
        seconds = scaling_validate.cpu_seconds(int(entry.name)) \
            if name in ("ps-worker", "ps-server") else None
        if seconds is not None:
            out[int(entry.name)] = (name, seconds)
    return out


def run(hosts, job: pathlib.Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "python")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                  else [])))
    seen: dict[int, tuple[str, float]] = {}   # the programs' CPU, sampled until they exit
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            seen.update(program_cpu())
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        done = subprocess.run(["ip", "netns", "exec", hosts.head, sys.executable, "-m",
                               "pstrain", str(job), "--quiet"], env=env, capture_output=True,
                              text=True, timeout=timeout)
    finally:
        stop.set()
        sampler.join()
    summary, events = netns_hosts.finished_run(job, done)
    train = [e for e in events if e.get("event") == "train" and e.get("rank") == 0]
    first, last = train[0], train[-1]       # after the first display: warmed up
    steady = ((last["iter"] - first["iter"]) * HOSTS * PER_HOST * BATCH
              / (last["time"] - first["time"]))
    iters = yaml.safe_load(job.read_text())["solver_overrides"]["max_iter"]
    cpu = {who: sum(c for name, c in seen.values() if name == who) / iters
           for who in ("ps-worker", "ps-server")}
    return {"images_per_s": round(steady, 2), "bytes_pushed": summary["bytes_pushed"],
            # CPU seconds an iteration of all workers and of all shards (start-up included)
            "worker_cpu_s_per_iter": round(cpu["ps-worker"], 4),
            "server_cpu_s_per_iter": round(cpu["ps-server"], 4),
            "bytes_pulled": summary["bytes_pulled"], "servers": summary["servers"],
            "hosts": summary.get("hosts")}


def calibrate(build: pathlib.Path, rounds: int, rate_mbit: int = 1000) -> dict:
    """E8's bsp constants (bench/scaling_cpu.e8_constants) on the path the layouts'
    bytes take: ps-bench with 2 worker threads on host 1, its server on host 2, the links
    shaped as the job's (`shape`), CURVE on as in the job (security: curve, which ps-train
    requires between hosts). The median of `rounds` runs of each constant."""
    import statistics
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="host-layout-cpu-"))
    hosts = netns_hosts.NetnsHosts(tmp, 2)
    try:
        shape(hosts, rate_mbit)
        runs = [scaling_cpu.e8_constants(build, "bsp", 2, client_ns=hosts.ns(1),
                                              server_ns=hosts.ns(2),
                                              bind_host=hosts.address(2), curve=True)
                for _ in range(rounds)]
    finally:
        hosts.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"cpu_bsp": {k: statistics.median(r[k] for r in runs) for k in runs[0]},
            "path": f"2 netns hosts, veth + bridge, tbf {rate_mbit}mbit both ends, CURVE",
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "load_after": scaling_validate.loadavg(), "rounds": runs}


def predict(calibration: pathlib.Path, build: pathlib.Path,
            cpu_from: pathlib.Path | None = None, rate_mbit: int = 1000,
            exchange_from: pathlib.Path | None = None) -> dict:
    """The cost model's images/s for each layout: 8 workers, 2 a host, the shards beside
    them (one, or one a host), links of `rate_mbit` with the tbf burst `shape` sets, bsp,
    the early pull, E8's CPU constants of the validation run on 2 cores. `exchange_from`:
    bench/exchange_probe.py's JSON, E15's efficiency for each layout's pushers a host
    (one with host_aggregation, PER_HOST without) on HOSTS hosts at `rate_mbit`, of the
    shaped rate the model gives the links here (`efficiency_of_rate`); None: 1."""
    from pstrain import costmodel
    calib = json.loads(calibration.read_text())["calibration"]
    with tempfile.TemporaryDirectory(prefix="host-layout-model-") as tmp:
        net = pathlib.Path(tmp) / "net.prototxt"
        # the MLP with its Data layer replaced by inputs of the same shapes
        data = NET[NET.index('layer { name: "data"'):NET.index('layer { name: "ip1"')]
        net.write_text(NET.replace(data, (
            'layer { name: "data" type: "Input" top: "data" input_param { shape { '
            f'dim: {BATCH} dim: 1 dim: 28 dim: 28 }} }} }}\n'
            'layer { name: "label" type: "Input" top: "label" input_param { shape { '
            f'dim: {BATCH} }} }} }}\n')))
        out = subprocess.run([str(build / "bin/ps-net"), "time", "--model", str(net),
                              "--iterations", "20", "--threads", "1", "--engine", "fast",
                              "--json"], capture_output=True, text=True, check=True, timeout=600)
        times = pathlib.Path(tmp) / "times.jsonl"
        times.write_text(out.stdout)
        layers = costmodel.load_layer_times(times)
        params = costmodel.net_params(net)
    # c_s and c_w of the path: the validation run's, ps-bench over loopback without CURVE
    path = calib["cpu_bsp"]
    curve = 0.0
    if cpu_from is not None:
        # E8's CPU from `calibrate` (this path, CURVE on, as the job runs); CURVE in the
        # path as E14's cap on the I/O threads (bench/scaling_calibrate.py's constant)
        measured = dict(json.loads(cpu_from.read_text())["cpu_bsp"])
        # the machine's busy CPU per byte, the kernel's packet work in idle time with it,
        # shared between the worker and the server as their threads' CPU is (on cores the
        # job keeps busy that work is charged to the job's threads)
        machine = measured.get("machine_ns_per_byte")
        threads = measured["worker_ns_per_byte"] + measured["server_ns_per_byte"]
        if machine and threads > 0:
            for who in ("worker", "server"):
                measured[f"{who}_ns_per_byte"] *= max(1.0, machine / threads)
        calib = dict(calib, cpu_bsp=measured)
        curve = json.loads(CURVE_CALIBRATION.read_text())["curve_ns_per_wire_byte"] * 1e-9
    bw = rate_mbit * 1e6 / 8
    base = dict(workers=HOSTS * PER_HOST, mode="bsp", worker_bw=bw, server_bw=bw,
                latency_s=0.0, message_s=calib["message_us"] * 1e-6,
                server_byte_s=path["server_ns_per_byte"] * 1e-9,
                worker_byte_s=path["worker_ns_per_byte"] / 2 * 1e-9, curve_byte_s=curve,
                kernel_byte_s=1 / calib["wire_bytes_per_s"],
                link_kernel_byte_s=1 / calib["wire_bytes_per_s"], early_pull=True, cores=2,
                burst_bytes=burst_bytes(rate_mbit), streamed_pulls=True,
                workers_per_host=PER_HOST, servers_beside_workers=True,
                **scaling_cpu.e8_inputs(calib["cpu_bsp"], calib))
    # the I/O threads transport.io_threads: auto gives these jobs (python/pstrain/plan.py:
    # a worker one a shard, a shard one a pusher, 8 at most)
    layouts = {"today": dict(servers=1, worker_io_threads=1,
                             server_io_threads=min(8, HOSTS * PER_HOST)),
               "per_host": dict(servers=HOSTS, worker_io_threads=min(8, HOSTS),
                                server_io_threads=min(8, HOSTS * PER_HOST)),
               "per_host+agg": dict(servers=HOSTS, host_aggregation=True,
                                    worker_io_threads=min(8, HOSTS),
                                    server_io_threads=min(8, HOSTS))}
    if exchange_from is not None:
        measured = {r["per_host"]: r["efficiency_of_rate"]
                    for r in json.loads(exchange_from.read_text())["results"]
                    if r["rate_mbit"] == rate_mbit and r["hosts"] == HOSTS}
        for name, extra in layouts.items():
            pushers = 1 if extra.get("host_aggregation") else PER_HOST
            if pushers not in measured:
                raise SystemExit(f"host_layout: {exchange_from} has no efficiency for "
                                 f"{pushers} pusher(s) a host on {HOSTS} hosts at "
                                 f"{rate_mbit} Mbit/s (bench/exchange_probe.py --hosts "
                                 f"{HOSTS} --per-host {pushers} --rate-mbit {rate_mbit})")
            extra["exchange_efficiency"] = measured[pushers]
    return {name: costmodel.predict(layers, params, BATCH, costmodel.Cluster(**base, **extra))
            for name, extra in layouts.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=14)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--data", type=pathlib.Path, default=ROOT / "data" / "fashion-mnist")
    ap.add_argument("--predict", type=pathlib.Path, metavar="JSON",
                    help="the cost model's figures, with this validation run's calibration")
    ap.add_argument("--cpu", type=pathlib.Path, metavar="JSON",
                    help="with --predict: E8's constants from --calibrate's JSON")
    ap.add_argument("--calibrate", type=pathlib.Path, metavar="JSON_OUT",
                    help="no job: measure E8's constants on the layouts' path (2 hosts, "
                         "CURVE) --rounds times and write them here")
    ap.add_argument("--exchange", type=pathlib.Path, metavar="JSON",
                    help="with --predict: E15's efficiencies from bench/exchange_probe.py")
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    ap.add_argument("--rate-mbit", type=int, default=1000,
                    help="every link's rate each way (tbf), measured and predicted")
    ap.add_argument("--sysctl", action="append", default=[], metavar="KEY=VALUE",
                    help="set in every host's namespace before the jobs (repeatable), e.g. "
                         "net.ipv4.tcp_slow_start_after_idle=0")
    a = ap.parse_args()
    if (a.cpu or a.exchange) and not a.predict:
        ap.error("--cpu and --exchange go with --predict")
    if a.sysctl and (a.predict or a.calibrate):
        ap.error("--sysctl goes with a measuring run, not --predict or --calibrate")
    if a.calibrate:
        why = netns_hosts.unavailable()
        if why:
            print(f"host_layout: {why}", file=sys.stderr)
            return 2
        text = json.dumps(calibrate(a.build.resolve(), a.rounds, a.rate_mbit), indent=1)
        a.calibrate.write_text(text + "\n")
        print(text)
        return 0
    if a.predict:
        for name, p in predict(a.predict, a.build.resolve(), a.cpu, a.rate_mbit,
                                 a.exchange).items():
            print(f"{name:14} predicted {p.images_per_s:7.1f} images/s, "
                  f"{p.iteration_s * 1e3:7.1f} ms an iteration, {p.bottleneck}")
        return 0
    why = netns_hosts.unavailable()
    if why:
        print(f"host_layout: {why}", file=sys.stderr)
        return 2
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="host-layout-"))
    (tmp / "hosts").mkdir()
    hosts = netns_hosts.NetnsHosts(tmp / "hosts", HOSTS)
    results: dict[str, list[dict]] = {}
    try:
        shape(hosts, a.rate_mbit)
        set_sysctls(hosts, a.sysctl)
        for r in range(a.rounds):
            for layout in a.layouts.split(","):
                job = write_job(tmp / f"round{r}", hosts, layout, a.iters, a.data.resolve())
                res = run(hosts, job, timeout=900)
                res.update(layout=layout, round=r, params=PARAMS, sysctl=a.sysctl)
                print(json.dumps(res), flush=True)
                results.setdefault(layout, []).append(res)
    finally:
        hosts.close()
        shutil.rmtree(tmp, ignore_errors=True)
    base = max(x["images_per_s"] for x in results.get("today", [{"images_per_s": 0}])) or None
    print(f"{'layout':14} {'images/s (each round)':28} {'x today':>8} {'MB pushed/iter':>15}")
    for layout, runs in results.items():
        best = max(x["images_per_s"] for x in runs)
        mb = runs[0]["bytes_pushed"] / a.iters / 1e6
        print(f"{layout:14} {', '.join(str(x['images_per_s']) for x in runs):28} "
              f"{best / base if base else float('nan'):8.2f} {mb:15.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
