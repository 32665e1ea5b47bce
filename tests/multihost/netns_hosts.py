"""Hosts for the multi-host tests: Linux network namespaces on a bridge, each
running a real OpenSSH server, all made (and all removed) by the test.

    head      namespace <p>h: the bridge <p>br at 10.77.0.1/24; ps-train runs here
    host i    namespace <p>n<i>: a veth at 10.77.0.(10+i)/24 whose peer is on the
              bridge, loopback up, sshd -D on port 22 of that address

Addresses exist inside these namespaces only; the machine's own namespace gets
no address, route or interface. sshd uses a throwaway host key, the client a
throwaway user key and known_hosts, all in the test's folder; an ssh_config
there (passed as `ssh -F`) names them. close() kills every process in every
namespace, then deletes the namespaces (which removes the veths and the bridge).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

SUBNET = "10.77.0"



def finished_run(job: pathlib.Path, done: subprocess.CompletedProcess) -> tuple[dict, list]:
    """The summary and the metrics events of the run that job file made (its output
    folder and name), once ps-train has exited (`done`). A run that left no summary or
    did not end ok raises RuntimeError with the job file and the end of its output."""
    import yaml  # the benches that call this have it; the tests that import this may not

    spec = yaml.safe_load(job.read_text())
    run_dir = pathlib.Path(spec["output"]) / spec["name"]
    if not (run_dir / "summary.json").exists():
        raise RuntimeError(f"{job}: no summary.json: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    if summary["status"] != "ok":
        raise RuntimeError(f"{job}: {summary['message']}\n{done.stdout[-2000:]}")
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return summary, events


def unavailable() -> str | None:
    """Why these tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, bridge, sshd)"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not pathlib.Path("/usr/sbin/sshd").exists():
        return "/usr/sbin/sshd not found (Debian package openssh-server)"
    probe = f"pstprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add fails here: {made.stderr.strip()}"
    try:
        veth = subprocess.run(["ip", "-n", probe, "link", "add", "name", "pa", "type", "veth",
                               "peer", "name", "pb"], capture_output=True, text=True)
        if veth.returncode != 0:
            return f"veth pairs unavailable: {veth.stderr.strip()}"
        bridge = subprocess.run(["ip", "-n", probe, "link", "add", "name", "br0", "type", "bridge"],
                                capture_output=True, text=True)
        if bridge.returncode != 0:
            return f"bridges unavailable: {bridge.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class NetnsHosts:
    """`count` hosts; address(i) for i in 1..count; head is where ps-train runs."""

    def __init__(self, folder: pathlib.Path, count: int):
        self.folder = folder
        self.prefix = f"pst{os.getpid() % 100000}"
        self.head = f"{self.prefix}h"
        self.count = count
        self.namespaces: list[str] = []
        self.sshd: dict[int, subprocess.Popen] = {}
        self.made_run_sshd = False
        try:
            self._network()
            self._keys()
            for i in range(1, count + 1):
                self.start_sshd(i)
        except BaseException:
            self.close()
            raise

    def ns(self, i: int) -> str:
        return f"{self.prefix}n{i}"

    def address(self, i: int) -> str:
        return f"{SUBNET}.{10 + i}"

    @property
    def ssh_config(self) -> pathlib.Path:
        return self.folder / "ssh_config"

    def _network(self) -> None:
        p = self.prefix
        _ip("netns", "add", self.head)
        self.namespaces.append(self.head)
        _ip("-n", self.head, "link", "set", "lo", "up")
        _ip("-n", self.head, "link", "add", f"{p}br", "type", "bridge")
        _ip("-n", self.head, "addr", "add", f"{SUBNET}.1/24", "dev", f"{p}br")
        _ip("-n", self.head, "link", "set", f"{p}br", "up")
        for i in range(1, self.count + 1):
            ns = self.ns(i)
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # Made inside the host's namespace; the peer moves to the head's bridge.
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"{p}b{i}")
            _ip("-n", ns, "link", "set", f"{p}b{i}", "netns", self.head)
            _ip("-n", self.head, "link", "set", f"{p}b{i}", "master", f"{p}br")
            _ip("-n", self.head, "link", "set", f"{p}b{i}", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def _keys(self) -> None:
        f = self.folder
        for name in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pstrain-test",
                            "-f", str(f / name)], check=True, timeout=30)
        (f / "authorized_keys").write_text((f / "user_key.pub").read_text())
        host_pub = " ".join((f / "host_key.pub").read_text().split()[:2])
        (f / "known_hosts").write_text("".join(f"{self.address(i)} {host_pub}\n"
                                               for i in range(1, self.count + 1)))
        self.ssh_config.write_text(
            f"Host {SUBNET}.*\n"
            f"  User root\n"
            f"  IdentityFile {f / 'user_key'}\n"
            f"  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {f / 'known_hosts'}\n"
            f"  GlobalKnownHostsFile /dev/null\n"
            f"  StrictHostKeyChecking yes\n"
            f"  LogLevel ERROR\n")
        for path in ("host_key", "user_key"):
            os.chmod(f / path, 0o600)
        if not pathlib.Path("/run/sshd").exists():   # sshd's privilege separation folder
            pathlib.Path("/run/sshd").mkdir(mode=0o755)
            self.made_run_sshd = True

    def start_sshd(self, i: int) -> None:
        f = self.folder
        config = f / f"sshd_config_{i}"
        config.write_text(
            f"ListenAddress {self.address(i)}:22\n"
            f"HostKey {f / 'host_key'}\n"
            f"AuthorizedKeysFile {f / 'authorized_keys'}\n"
            f"PidFile {f / f'sshd_{i}.pid'}\n"
            f"PermitRootLogin prohibit-password\n"
            f"PasswordAuthentication no\n"
            f"KbdInteractiveAuthentication no\n"
            f"UsePAM no\n"
            f"StrictModes no\n"
            f"ClientAliveInterval 2\n"
            f"ClientAliveCountMax 3\n"
            f"MaxStartups 100\n"
            f"MaxSessions 100\n")
        log = open(f / f"sshd_{i}.log", "a")
        self.sshd[i] = subprocess.Popen(["ip", "netns", "exec", self.ns(i), "/usr/sbin/sshd",
                                         "-D", "-e", "-f", str(config)], stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.run_ssh(i, "true", timeout=10).returncode == 0:
                return
            if self.sshd[i].poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"sshd in {self.ns(i)} did not start: "
                           f"{(f / f'sshd_{i}.log').read_text()[-500:]}")

    def run_ssh(self, i: int, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """`command` on host i over ssh, from the head namespace."""
        return subprocess.run(["ip", "netns", "exec", self.head, "ssh", "-F",
                               str(self.ssh_config), "-o", "BatchMode=yes",
                               self.address(i), command],
                              capture_output=True, text=True, timeout=timeout)

    def pids(self, ns: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def processes(self, ns: str) -> list[str]:
        """'pid: command line' of each process living in namespace ns."""
        found = []
        for pid in self.pids(ns):
            try:
                cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{pid}: {cmd.decode(errors='replace').strip()}")
            except OSError:
                pass
        return found

    def kill_all(self, ns: str) -> None:
        for pid in self.pids(ns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        for ns in self.namespaces:
            self.kill_all(ns)
        for proc in self.sshd.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(self.pids(ns) for ns in self.namespaces):
            time.sleep(0.1)
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces = []
        if self.made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)
            self.made_run_sshd = False
