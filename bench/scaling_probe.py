#!/usr/bin/env python3
"""Where does an iteration's time go? Runs PSTrain jobs like bench/scaling_validate.py and
reports, per job: images/s, each worker's share of time waiting for pulls (the train
events' pull_wait_seconds), the CPU seconds per iteration of every worker and server
(/proc/PID/stat, sampled until exit), and the other programs' busy autogroups.

usage: python3 bench/scaling_probe.py [--link loopback|100mbit|1gbit] [--workers 2]
           [--mode asp] [--rounds 2] [--iters 120] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
import scaling_validate as sv  # noqa: E402
from ps_lenet import write_solver  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def job(build, solver, workers, servers, mode, ns, iters):
    bind = "tcp://10.79.0.1:0" if ns else "tcp://127.0.0.1:0"
    srv_pre = ["ip", "netns", "exec", ns.server] if ns else []
    wrk_pre = ["ip", "netns", "exec", ns.worker] if ns else []
    common = ["--solver", str(solver), "--mode", mode, "--staleness", "2", "--job-key", "77",
              "--json"]
    folder = None
    if ns:
        from pstrain import keys
        folder = keys.make_keys(pathlib.Path(tempfile.mkdtemp(prefix="probe-keys-")), servers,
                                workers)
        common += ["--keys", str(folder)]
    procs, cpu, stop = [], {}, threading.Event()

    def sample():
        while not stop.wait(0.05):
            for p in list(procs):
                # the process under `ip netns exec` execs in place: same pid
                c = cpu_seconds(p.pid)
                if c is not None:
                    cpu[p.pid] = c
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    bg = None
    try:
        endpoints = []
        for k in range(servers):
            cmd = srv_pre + [str(build / "bin/ps-server"), "--shard", str(k), "--num-servers",
                             str(servers), "--workers", str(workers), "--bind", bind] + common
            if k:
                cmd += ["--coordinator", endpoints[0]]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, cwd=ROOT)
            procs.append(p)
            while True:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError(p.stderr.read()[-800:])
                if line.startswith("{") and json.loads(line).get("event") == "listening":
                    endpoints.append(json.loads(line)["endpoint"])
                    break
        bg = sv.Background()
        bg.pids += [p.pid for p in procs]
        wp = []
        for r in range(workers):
            cmd = wrk_pre + [str(build / "bin/ps-worker"), "--rank", str(r), "--workers",
                             str(workers), "--servers", ",".join(endpoints), "--threads", "1",
                             "--timeout-s", "120"] + common
            wp.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, start_new_session=True, cwd=ROOT))
            bg.pids.append(wp[-1].pid)
        procs += wp
        out = []
        for r, p in enumerate(wp):
            o, e = p.communicate(timeout=300)
            if p.returncode != 0:
                raise RuntimeError(e[-800:])
            ev = [json.loads(l) for l in o.splitlines() if l.startswith("{")]
            tr = [x for x in ev if x.get("event") == "train" and "images_per_second" in x][1:]
            out.append(tr)
        background = bg.stop()
        time.sleep(0.1)
        res = {"background": background, "workers": []}
        for r, tr in enumerate(out):
            ips = statistics.mean(x["images_per_second"] for x in tr)
            res["workers"].append({"images_per_s": ips,
                                   "pull_wait_s": [x.get("pull_wait_seconds") for x in tr],
                                   "cpu_s": cpu.get(wp[r].pid)})
        res["server_cpu_s"] = [cpu.get(p.pid) for p in procs[:servers]]
        res["images_per_s"] = sum(w["images_per_s"] for w in res["workers"])
        return res
    finally:
        stop.set()
        if bg is not None:
            bg.stop()
        sv.stop_process_groups(procs)
        if folder:
            import shutil
            shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--modes", default="bsp,asp")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=120)
    ap.add_argument("--json-out", type=pathlib.Path)
    a = ap.parse_args()
    build = (ROOT / a.build).resolve()
    results = []
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        solver = write_solver(pathlib.Path(tmp) / "lenet", 32, a.iters, a.iters // 6)
        for _ in range(a.rounds):
            for mode in a.modes.split(","):
                ns = None if a.link == "loopback" else sv.Namespaces(a.link)
                try:
                    r = job(build, solver, a.workers, a.servers, mode, ns, a.iters)
                finally:
                    if ns:
                        ns.close()
                r.update(link=a.link, mode=mode, W=a.workers, S=a.servers, iters=a.iters)
                results.append(r)
                it_s = a.workers * 32 / r["images_per_s"]
                waits = [statistics.mean(w["pull_wait_s"]) / (a.iters // 6) for w in r["workers"]]
                print(f"{a.link} W={a.workers} {mode}: {r['images_per_s']:.0f} img/s, "
                      f"iteration {1e3 * it_s:.1f} ms, pull wait/iter "
                      f"{[round(1e3 * w, 1) for w in waits]} ms, worker cpu/iter "
                      f"{[round(1e3 * w['cpu_s'] / a.iters, 1) for w in r['workers']]} ms, "
                      f"server cpu/iter {[round(1e3 * c / a.iters, 1) for c in r['server_cpu_s']]}"
                      f" ms, other busy groups {r['background']:.1f}", flush=True)
    if a.json_out:
        a.json_out.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
