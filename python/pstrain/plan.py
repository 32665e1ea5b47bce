"""From a validated JobConfig to a Plan: every file checked, the solver and net
copies worked out, the exact command of every process. Checking a plan starts
nothing and writes nothing (that is what --dry-run shows)."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import secrets
import shlex

from . import programs
from .config import JobConfig
from .errors import JobError
from .solver import (SOLVER_FIELDS, SolverText, absolute_net_text, batch_size, format_value,
                     net_paths, resolve_beside)

# Wall-clock guards the orchestrator passes to the programs.
WORKER_TIMEOUT_S = 120
SERVER_IDLE_EXIT_S = 300


@dataclasses.dataclass
class Plan:
    job: JobConfig
    source: str                        # the job file (for messages)
    run_dir: pathlib.Path
    solver_text: str                   # the generated solver (written to run_dir/solver.prototxt)
    nets: dict[str, tuple[pathlib.Path, str]]   # copy name -> (original, text with absolute paths)
    missing_sources: list[str]         # "net:line: layer: data source" of each absent one
    max_iter: int
    test_interval: int
    batch: int
    job_key: int
    server_bin: pathlib.Path
    worker_bin: pathlib.Path
    resume_manifest: pathlib.Path | None = None
    worker_gpus: list = dataclasses.field(default_factory=list)  # per rank: GPU id or None

    def worker_gpu(self, rank: int):
        return self.worker_gpus[rank] if rank < len(self.worker_gpus) else None

    def worker_env(self, rank: int) -> dict | None:
        """A GPU worker sees only its GPU (as device 0); several workers may share one."""
        gpu = self.worker_gpu(rank)
        if gpu is None:
            return None
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        return env

    @property
    def solver_copy(self) -> pathlib.Path:
        return self.run_dir / "solver.prototxt"

    @property
    def keys_dir(self) -> pathlib.Path | None:
        """The CURVE keys folder (keys.py), or None with security: none."""
        return self.run_dir / "keys" if self.job.security.auth == "curve" else None

    @property
    def wire_job_key(self) -> int:
        """The job key the programs get: with CURVE the keys admit peers and no key
        goes on a command line (0: none); without it, a guard against strays."""
        return 0 if self.keys_dir is not None else self.job_key

    def security_args(self) -> list[str]:
        keys = self.keys_dir
        return ["--keys", str(keys)] if keys is not None else []

    @property
    def snapshot_prefix(self) -> pathlib.Path:
        return self.run_dir / "snapshots" / self.job.name

    @property
    def originals(self) -> dict[pathlib.Path, pathlib.Path]:
        """Each prototxt copy in the run folder -> the user's file it was made from.
        A copy keeps every line of its original at the same line number."""
        copies = {self.solver_copy: self.job.solver}
        copies.update({self.run_dir / name: original for name, (original, _) in self.nets.items()})
        return copies

    def user_paths(self, text: str) -> str:
        """`text` (a program's message) with the copies named by the user's files,
        so that "<copy>:12: ..." reads "<the user's net>:12: ..."."""
        for copy, original in sorted(self.originals.items(), key=lambda c: -len(str(c[0]))):
            text = text.replace(str(copy), str(original))
        return text

    def bind_address(self, shard: int) -> str:
        t = self.job.transport
        if t.kind == "ipc":
            return f"ipc://{self.run_dir / 'sockets' / f'server-{shard}.sock'}"
        return f"tcp://{t.interface}:0"

    def server_command(self, shard: int, coordinator: str | None) -> list[str]:
        j = self.job
        cmd = [str(self.server_bin), "--shard", str(shard), "--num-servers", str(j.cluster.servers),
               "--workers", str(j.cluster.workers), "--bind", self.bind_address(shard),
               "--solver", str(self.solver_copy), "--mode", j.consistency.mode,
               "--staleness", str(j.consistency.staleness), "--chunk-bytes",
               str(j.transport.chunk_bytes), "--job-key", str(self.wire_job_key),
               "--idle-exit-s", str(SERVER_IDLE_EXIT_S), "--json",
               "--nonfinite", j.security.nonfinite] + self.security_args()
        if j.cluster.server_device != "cpu":
            cmd += ["--device", j.cluster.server_device]
        if shard > 0 and coordinator:
            cmd += ["--coordinator", coordinator]
        if self.resume_manifest is not None:
            cmd += ["--resume", str(self.resume_manifest)]
        return cmd

    def worker_command(self, rank: int, endpoints: list[str]) -> list[str]:
        j = self.job
        cmd = [str(self.worker_bin), "--solver", str(self.solver_copy), "--rank", str(rank),
               "--workers", str(j.cluster.workers), "--servers", ",".join(endpoints),
               "--job-key", str(self.wire_job_key), "--mode", j.consistency.mode,
               "--staleness", str(j.consistency.staleness), "--chunk-bytes",
               str(j.transport.chunk_bytes), "--threads", str(j.cluster.threads_per_worker),
               "--engine", j.engine, "--timeout-s", str(WORKER_TIMEOUT_S), "--json"]
        cmd += self.security_args()
        if self.worker_gpu(rank) is not None:
            cmd += ["--gpu", "0"]
        s = j.cluster.straggler
        if s is not None and s.rank == rank:
            cmd += ["--straggle-ms", str(s.delay_ms), "--straggle-jitter-ms", str(s.jitter_ms)]
        return cmd

    def describe(self) -> str:
        """The resolved job and every command line (endpoints as placeholders)."""
        servers = self.job.cluster.servers
        endpoints = [f"<server-{k} endpoint>" for k in range(servers)]
        lines = ["# resolved job", self.job.to_yaml().rstrip(), "", "# processes"]
        for k in range(servers):
            lines.append(shlex.join(self.server_command(k, endpoints[0])))
        for r in range(self.job.cluster.workers):
            gpu = self.worker_gpu(r)
            prefix = f"CUDA_VISIBLE_DEVICES={gpu} " if gpu is not None else ""
            lines.append(prefix + shlex.join(self.worker_command(r, endpoints)))
        return "\n".join(lines)


def make_plan(job: JobConfig, source: str, *, resume_manifest: pathlib.Path | None = None,
              preparing_data: bool = False) -> Plan:
    """Checks the cluster, the solver, its nets and their data; raises JobError."""
    worker_gpus = _check_cluster(job, source)
    if not job.solver.is_file():
        raise JobError(f"{source}: solver: file not found: {job.solver}")
    solver = SolverText.read(job.solver)
    nets: dict[str, tuple[pathlib.Path, str]] = {}
    missing: list[str] = []
    replacements: dict[str, list[str]] = {}
    paths = net_paths(solver)
    if not paths and "net_param" not in solver.text():
        raise JobError(f"{source}: solver: {job.solver} names no net (net: or train_net:)")
    counts: dict[str, int] = {}
    for field, value in paths:
        found = resolve_beside(value, job.solver.parent)
        if found is None:
            raise JobError(f"{source}: solver: {job.solver}: {field} file '{value}' not found "
                           f"(looked beside the solver and in the folders above it)")
        n = counts[field] = counts.get(field, 0) + 1
        copy_name = f"{field}.prototxt" if n == 1 else f"{field}_{n - 1}.prototxt"
        text, absent = absolute_net_text(found)
        nets[copy_name] = (found, text)
        missing += [f"{found}:{m.line}: layer '{m.layer}': data source '{m.path}'"
                    for m in absent]
        replacements.setdefault(field, []).append(copy_name)
    run_dir = job.run_dir
    for field, copies in replacements.items():
        solver.replace(field, [format_value("string", str(run_dir / c)) for c in copies])
    solver.replace("snapshot_prefix", [format_value("string", str(run_dir / "snapshots" / job.name))])
    for name, value in job.solver_overrides.items():
        kind, _ = SOLVER_FIELDS[name]
        values = value if isinstance(value, list) else [value]
        solver.replace(name, [format_value(kind, v) for v in values])
    if missing and not preparing_data:
        raise JobError(f"{source}: solver: {job.solver}: {missing[0]} not found "
                       f"(set data.prepare, or convert the data first)")
    max_iter = _int_field(solver, "max_iter", 0)
    if max_iter < 1:
        raise JobError(f"{source}: solver_overrides.max_iter: the solver must train at least one "
                       f"iteration, got max_iter {max_iter}")
    batch = batch_size(next(iter(nets.values()))[1]) if nets else 0
    if job.transport.kind == "ipc":
        longest = len(str(run_dir / "sockets" / f"server-{job.cluster.servers - 1}.sock"))
        if longest > 100:
            raise JobError(f"{source}: transport.kind: ipc socket paths under {run_dir} are too "
                           f"long for Unix sockets ({longest} > 100 characters); use tcp or a "
                           f"shorter output folder")
    return Plan(job=job, source=source, run_dir=run_dir, solver_text=solver.text(), nets=nets,
                missing_sources=missing, max_iter=max_iter,
                test_interval=_int_field(solver, "test_interval", 0), batch=batch,
                job_key=secrets.randbits(62) + 1, server_bin=programs.find_program("ps-server"),
                worker_bin=programs.find_program("ps-worker"), resume_manifest=resume_manifest,
                worker_gpus=worker_gpus)


def _int_field(solver: SolverText, name: str, default: int) -> int:
    values = solver.get(name)
    try:
        return int(values[-1]) if values else default
    except ValueError:
        return default


def _check_cluster(job: JobConfig, source: str) -> list:
    """Checks hosts and devices; returns each worker's GPU id (None: the CPU)."""
    c = job.cluster
    if c.hosts != "local":
        raise JobError(f"{source}: cluster.hosts: hostfile/slurm launchers are not supported yet "
                       f"(got {c.hosts!r}); use hosts: local")
    gpus = None
    if c.server_device.startswith("gpu:"):
        gpus = programs.gpu_count()
        n = int(c.server_device[4:])
        if not programs.cuda_build():
            raise JobError(f"{source}: cluster.server_device: server_device gpu:{n} needs a CUDA "
                           f"build (nvcc was not found when PSTRAIN was built)")
        if n >= gpus:
            raise JobError(f"{source}: cluster.server_device: GPU {n} does not exist (this "
                           f"machine has {gpus} GPUs per nvidia-smi -L)")
    if isinstance(c.worker_devices, list):
        gpus = programs.gpu_count() if gpus is None else gpus
        if len(c.worker_devices) != c.workers:
            raise JobError(f"{source}: cluster.worker_devices: lists {len(c.worker_devices)} GPUs "
                           f"for {c.workers} workers (one entry per worker; entries may repeat "
                           f"to share a GPU)")
        if not programs.cuda_build():
            raise JobError(f"{source}: cluster.worker_devices: GPU workers need a CUDA build "
                           f"(nvcc was not found when PSTRAIN was built)")
        absent = [g for g in c.worker_devices if g >= gpus]
        if absent:
            raise JobError(f"{source}: cluster.worker_devices: GPU {absent[0]} does not exist "
                           f"(this machine has {gpus} GPUs per nvidia-smi -L)")
    # worker_devices: auto uses GPUs when the build has CUDA and the machine GPUs; else the CPU.
    if isinstance(c.worker_devices, list):
        return list(c.worker_devices)
    if c.worker_devices == "auto":
        gpus = programs.gpu_count() if gpus is None else gpus
        if gpus > 0 and programs.cuda_build():
            return [rank % gpus for rank in range(c.workers)]
    return [None] * c.workers
