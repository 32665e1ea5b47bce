"""A job across three hosts from a hostfile, for real: each host a network
namespace with its own sshd (netns_hosts.py), ps-train in a fourth one, real
ssh sessions and real TCP between the namespaces. Each host has its own copy
of the run folder (remote.workdir names a different folder per host), so the
run folder's snapshots exist only because ps-train copied them back."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

import yaml

from conftest import ROOT
from pstrain_testing import base_job
from pstrain import Job

# PSTRAIN_MULTIHOST_ITERS=3000 runs the default job's full length (a few minutes
# each way); CI runs 60 iterations.
ITERS = int(os.environ.get("PSTRAIN_MULTIHOST_ITERS", "60"))
HALF = ITERS // 2


def job_dict(tmp: pathlib.Path, name: str, mode: str = "bsp", **changes) -> dict:
    """base_job at this module's length, bsp (staleness 0) or another mode (staleness 2).
    Engine fast: the runs compared bit for bit here run on different hosts, and engine
    auto's choice of CPU implementation per layer comes from each host's own timings
    (its cache file), so two hosts may round differently (docs/user-guide.md)."""
    changes.setdefault("engine", "fast")
    return base_job(tmp, name=name,
                    solver_overrides={"max_iter": ITERS, "test_interval": HALF,
                                      "test_iter": 10 if ITERS < 1000 else 100, "snapshot": HALF,
                                      "display": 10 if ITERS < 1000 else 100},
                    consistency={"mode": mode, "staleness": 0 if mode == "bsp" else 2},
                    **changes)


def digest(path: pathlib.Path) -> str:
    """A file's SHA-256: snapshots compared bit for bit, with a short message when they differ."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hostfile_job(tmp: pathlib.Path, hosts, name: str, slots: dict[int, int] | None = None,
                 order: tuple[int, ...] = (1, 2, 3), placement: str = "first_slots",
                 **changes) -> pathlib.Path:
    """A job file whose hostfile lists the hosts in `order`. With `placement`
    first_slots server 0 goes to the first, workers 0 and 1 to the next slots
    (hosts 1, 2, 3 by default); with per_host workers take the first slots and a
    server runs beside them on each of their hosts."""
    slots = slots or {}
    hostfile = tmp / f"{name}.hosts"
    hostfile.write_text("# made by the test\n" + "".join(
        f"{hosts.address(i)} slots={slots.get(i, 1)}\n" for i in order))
    job = job_dict(tmp, name, **changes)
    job["cluster"].update(hosts="hostfile", hostfile=str(hostfile), server_placement=placement)
    if placement == "per_host":
        del job["cluster"]["servers"]       # the default: one a worker host
    job["remote"] = {"ssh_options": ["-F", str(hosts.ssh_config)],
                     "workdir": str(tmp / "on-host-{host}" / "{name}")}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def ps_train(hosts, job: pathlib.Path, *extra: str) -> subprocess.Popen:
    """ps-train in the head namespace (where the hosts' addresses are reachable)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.Popen(["ip", "netns", "exec", hosts.head, sys.executable, "-m", "pstrain",
                             str(job), "--quiet", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run_to_end(hosts, job: pathlib.Path,
               timeout: float = 240 + ITERS * 0.5) -> tuple[dict, str]:
    proc = ps_train(hosts, job)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run_dir = pathlib.Path(yaml.safe_load(job.read_text())["output"]) / job.stem
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary, out


def no_programs_left(hosts) -> list[str]:
    """The ps-server and ps-worker processes running on any host."""
    return [p for i in (1, 2, 3) for p in hosts.processes(hosts.ns(i))
            if p.split()[1].rsplit("/", 1)[-1] in ("ps-server", "ps-worker")]


def test_bsp_across_three_hosts_equals_bsp_on_one(tmp_path, hosts, fashion_mnist):
    summary, out = run_to_end(hosts, hostfile_job(tmp_path, hosts, "across"))
    assert summary["status"] == "ok", (summary["message"], out)
    run = tmp_path / "runs" / "across"
    # Placement: server 0 on host 1, workers 0 and 1 on hosts 2 and 3.
    assert summary["hosts"] == {"server-0": hosts.address(1), "worker-0": hosts.address(2),
                                "worker-1": hosts.address(3)}
    # Each process wrote only in its host's folder; snapshots came back over ssh.
    for i, names in ((1, [f"across_iter_{ITERS}.shard0.state"]),
                     (2, [f"across_iter_{ITERS}.caffemodel", f"across_iter_{ITERS}.manifest"])):
        host_snapshots = tmp_path / f"on-host-{hosts.address(i)}" / "across" / "snapshots"
        for n in names:
            assert (host_snapshots / n).is_file(), n
            assert digest(run / "snapshots" / n) == digest(host_snapshots / n) \
                or n.endswith(".manifest")
    manifest = (run / "snapshots" / f"across_iter_{ITERS}.manifest").read_text()
    assert f'"{run}/snapshots/across_iter_{ITERS}.shard0.state"' in manifest
    assert "on-host-" not in manifest
    assert summary["snapshot"] == str(run / "snapshots" / f"across_iter_{ITERS}.caffemodel")
    # Logs and metrics of every host are in the one run folder.
    for log in ("server-0", "worker-0", "worker-1"):
        assert (run / "logs" / f"{log}.log").stat().st_size > 0
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert {(r["role"], r["rank"]) for r in metrics if r["event"] == "train"} == \
        {("worker", 0), ("worker", 1)}
    assert f"worker 1 on {hosts.address(3)}" in (run / "logs" / "worker-1.log").read_text()

    # The same job on one host (this namespace, 127.0.0.1): the same weights, bit for bit.
    local = Job.from_yaml(write(tmp_path, job_dict(tmp_path, "local"))).run(
        quiet=True, timeout=240 + ITERS * 0.5)
    assert local.ok, local.summary["message"]
    for it in (HALF, ITERS):
        assert digest(run / "snapshots" / f"across_iter_{it}.caffemodel") == \
            digest(tmp_path / "runs" / "local" / "snapshots" / f"local_iter_{it}.caffemodel")
    assert summary["final_test_accuracy"] == local.summary["final_test_accuracy"]
    assert not no_programs_left(hosts)


def write(tmp: pathlib.Path, job: dict) -> pathlib.Path:
    path = tmp / f"{job['name']}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path
