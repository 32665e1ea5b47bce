"""One task of ps-train's Slurm step: `python3 -m pstrain.slurmnode PLAN.json [--tasks I,J]`.

srun starts this on every task of the step. The task's number in the plan is
SLURM_PROCID (or, for a step that restarts some tasks, the SLURM_PROCID-th
entry of --tasks): tasks 0..S-1 are the servers, S.. the workers. In the
task's command `@NODE@` becomes this node's name (SLURMD_NODENAME); `@COORDINATOR@`
and `@SERVERS@` wait for ps-train, which broadcasts JSON lines on the step's
stdin (srun --input=all):

    {"coordinator": "tcp://node1:40123"}         server 0's endpoint
    {"servers": ["tcp://node1:40123", ...]}      every server's endpoint
    {"signal": 15, "task": 3}                    a signal for task 3's program

A task the plan gives a "node" (the workers of host groups,
transport.host_aggregation: ps-train placed them with srun
--distribution=arbitrary) must run there: on another node it starts nothing,
says so and exits with status 2, as its group's shared memory and the
servers' count of pushers hold only on that node.

A worker with `gpu_from_slurm` trains on the first GPU Slurm's GRES gave the
task (CUDA_VISIBLE_DEVICES). The program's output goes to the task's stdout;
its exit status follows as the task's last line, {"event":"task_exit",
"status":N} (N < 0: killed by signal -N). When stdin ends (ps-train gone)
the program gets SIGTERM, and SIGKILL 5 s later.

The program runs under umask 077, as the processes ps-train starts on its own
machine: its checkpoints and files on the node are its owner's only, whatever
umask srun passed on (docs/security.md, "A hostile local user").
"""
from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time


def _read_stdin(inbox: "queue.Queue[dict | None]") -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(message, dict):
            inbox.put(message)
    inbox.put(None)


def main(argv: list[str]) -> int:
    if not argv:
        print("pstrain.slurmnode: usage: python3 -m pstrain.slurmnode PLAN.json [--tasks I,J]",
              file=sys.stderr)
        return 2
    os.umask(0o077)
    with open(argv[0]) as f:
        plan = json.load(f)
    procid = int(os.environ.get("SLURM_PROCID", "0"))
    tasks = list(range(len(plan["tasks"])))
    if len(argv) >= 3 and argv[1] == "--tasks":
        tasks = [int(t) for t in argv[2].split(",")]
    me = tasks[procid]
    task = plan["tasks"][me]
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    expected = task.get("node")
    if expected and expected != node:
        sys.stdout.write(f"pstrain.slurmnode: {task['role']} {task['rank']} runs on {node}, but "
                         f"ps-train placed it on {expected} (transport.host_aggregation groups "
                         f"the workers by node); srun did not follow --distribution=arbitrary\n")
        sys.stdout.write(json.dumps({"event": "task_exit", "status": 2}) + "\n")
        sys.stdout.flush()
        return 2
    inbox: queue.Queue[dict | None] = queue.Queue()
    threading.Thread(target=_read_stdin, args=(inbox,), daemon=True).start()

    values = {"@NODE@": node}
    needed = {k for k in ("@COORDINATOR@", "@SERVERS@") if any(k in a for a in task["argv"])}
    while not needed <= values.keys():
        message = inbox.get()
        if message is None:
            return 0    # ps-train went away before this task started
        if "coordinator" in message:
            values["@COORDINATOR@"] = str(message["coordinator"])
        if "servers" in message:
            values["@SERVERS@"] = ",".join(message["servers"])
    cmd = []
    for arg in task["argv"]:
        for key, value in values.items():
            arg = arg.replace(key, value)
        cmd.append(arg)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if task["role"] == "worker" and plan.get("gpu_from_slurm") and visible:
        cmd += ["--gpu", "0"]
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def stop(sig: int) -> None:
        if child.poll() is None:
            child.send_signal(sig)

    signal.signal(signal.SIGTERM, lambda s, f: stop(signal.SIGTERM))
    signal.signal(signal.SIGINT, lambda s, f: stop(signal.SIGTERM))
    ended_at = None
    while child.poll() is None:
        try:
            message = inbox.get(timeout=0.2)
        except queue.Empty:
            message = {}
        if message is None and ended_at is None:    # ps-train is gone
            ended_at = time.monotonic()
            stop(signal.SIGTERM)
        elif message and message.get("task") == me and "signal" in message:
            stop(int(message["signal"]))
        if ended_at is not None and time.monotonic() - ended_at > 5:
            stop(signal.SIGKILL)
    status = child.wait()
    sys.stdout.write(json.dumps({"event": "task_exit", "status": status}) + "\n")
    sys.stdout.flush()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
