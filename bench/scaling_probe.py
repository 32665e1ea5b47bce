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
import pathlib
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
import scaling_validate as sv  # noqa: E402
from ps_lenet import write_solver  # noqa: E402

def job(build, solver, workers, servers, mode, ns):
    """One job through scaling_validate.run_job: per worker its mean images/s (the first
    train event left out), its pull waits and CPU seconds; the servers' CPU seconds."""
    raw = sv.run_job(build, solver, workers, servers, mode, 2, ns)
    res = {"background": raw["background"], "workers": []}
    for r, events in enumerate(raw["train_events"]):
        tr = events[1:]
        res["workers"].append({"images_per_s": statistics.mean(x["images_per_second"]
                                                               for x in tr),
                               "pull_wait_s": [x.get("pull_wait_seconds") for x in tr],
                               "cpu_s": raw["worker_cpu_s"][r]})
    res["server_cpu_s"] = raw["server_cpu_s"]
    res["images_per_s"] = sum(w["images_per_s"] for w in res["workers"])
    return res


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
                    r = job(build, solver, a.workers, a.servers, mode, ns)
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
