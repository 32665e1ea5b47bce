"""From a validated JobConfig to a Plan: every file checked, the solver and net
copies worked out, the exact command of every process. Checking a plan starts
nothing and writes nothing (that is what --dry-run shows).

Where the processes run comes from the job's launcher as a Layout (layout.py),
made before the plan (runner.py: launchers.launcher_for(...).layout): the plan
asks it for each process's address and GPU and never which launcher it has."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import secrets
import shlex

from . import caffe_schema, programs
from .config import JobConfig
from .errors import JobError
from .layout import Layout
from .solver import (SOLVER_FIELDS, SolverText, absolute_net_text, batch_size, format_value,
                     net_paths, resolve_beside, weights_paths)

# Wall-clock guards the orchestrator passes to the programs.
WORKER_TIMEOUT_S = 120
# With a step gate a worker's pull waits at the gate for as long as the driver's
# script takes between two steps: no silence is an error then (a lost server is
# seen by the orchestrator, which watches every process).
GATED_WORKER_TIMEOUT_S = 7 * 24 * 3600
SERVER_IDLE_EXIT_S = 300
# transport.io_threads: auto over hosts: one ZeroMQ I/O thread a connection, at most this many
AUTO_IO_THREADS = 8


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
    layout: Layout                     # where each process runs (the launcher's, layout.py)
    resume_manifest: pathlib.Path | None = None
    # Worker 0's --weights on a fresh run: the job's weights:, else the solver's own.
    initial_weights: list[pathlib.Path] = dataclasses.field(default_factory=list)
    # Said at a run's start, shown by --dry-run (the solver's snapshot_prefix replaced, ...).
    warnings: list[str] = dataclasses.field(default_factory=list)
    # ps-server --step-gate: a driver (pstrain.DistributedSolver) opens the gate step by step.
    step_gate: bool = False
    # A driver's starting weights (DistributedSolver's net): copied into the run folder
    # as initial.caffemodel, which is then worker 0's --weights (shipped to its host).
    initial_model: pathlib.Path | None = None

    @property
    def worker_gpus(self) -> list:
        """Per worker rank: the GPU id it trains on, or None (the CPU)."""
        return self.layout.worker_gpus

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
    def memory_data(self) -> dict[str, list[tuple[pathlib.Path, pathlib.Path]]]:
        """data.memory_data: per MemoryData layer, (the job's file, its copy in the run
        folder) for DATA and LABELS. The workers read the copies (hard links where the
        filesystem allows, so local workers share one page cache); a hostfile job ships
        them to the hosts with the run folder."""
        data = self.job.data.memory_data if self.job.data is not None else {}
        return {layer: [(path, self.run_dir / "data" / f"memory-{i}.{what}.npy")
                        for what, path in zip(("data", "labels"), paths)]
                for i, (layer, paths) in enumerate(data.items())}

    @property
    def keys_dir(self) -> pathlib.Path | None:
        """The CURVE keys folder (keys.py), or None with security: none."""
        return self.run_dir / "keys" if self.job.security.auth == "curve" else None

    @property
    def wire_job_key(self) -> int:
        """The job key the programs get: with CURVE the keys admit peers and no key
        goes on a command line (0: none); without it, a guard against strays."""
        return 0 if self.keys_dir is not None else self.job_key

    def job_key_note(self) -> str:
        """What the --job-key on the command lines is, for the dry run."""
        if self.keys_dir is not None:
            return (f"--job-key 0: security curve; the CURVE keys in {self.keys_dir} (made "
                    f"when the run starts) admit this job's processes only, so no key goes on "
                    f"a command line, where any local user could read it")
        return (f"--job-key {self.wire_job_key}: security none; a random number, new for each "
                f"run, that every message carries; servers refuse messages with another key "
                f"(a process of another job): a guard against mistakes, not against attackers")

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
        address = self.layout.server_address(shard)
        if address is not None and t.interface == "127.0.0.1":
            # On its host, a server binds the address its peers reach it at.
            return f"tcp://{address}:0"
        return f"tcp://{t.interface}:0"

    def host_groups(self) -> list[int] | None:
        """transport.host_aggregation: per worker rank, its host group (numbered in
        order of first appearance, so worker 0 is in group 0), or None when every
        worker pushes alone: aggregation off, not bsp (auto), or no host with two
        workers. The servers see one pusher a group (docs/user-guide.md). Fixed when
        first asked (make_plan): a worker relocated to another host later keeps its
        group, as the servers' count of pushers does."""
        if "_host_groups" not in self.__dict__:
            self.__dict__["_host_groups"] = self._place_host_groups()
        return self.__dict__["_host_groups"]

    def _place_host_groups(self) -> list[int] | None:
        j = self.job
        setting = j.transport.host_aggregation
        c = j.consistency
        lockstep = (c.mode == "bsp" and not c.backup_workers and c.easgd is None
                    and c.local_sgd is None)
        if setting is False or not lockstep:
            return None
        # Sufficient-factor broadcasting needs each worker's own factors: auto leaves the
        # workers ungrouped (true is refused at plan time).
        if setting == "auto" and j.transport.factor_broadcast:
            return None
        hosts = self.layout.worker_hosts()
        if hosts is None:
            if setting is True:
                raise JobError(f"{self.source}: transport.host_aggregation: true is not "
                               f"available with hosts: {j.cluster.hosts} here "
                               f"({self.layout.worker_hosts_unknown()}); set auto or false")
            return None
        number: dict[str, int] = {}
        groups = [number.setdefault(h, len(number)) for h in hosts]
        return groups if len(number) < len(groups) else None

    def pull_overlap(self) -> bool:
        """transport.pull_overlap: workers start each layer's forward once its own
        weights are pulled (ps-worker --pull-overlap) and servers answer pulls in
        forward order (ps-server --pull-overlap). auto: on, except under a step gate
        (a driver's GATE checkpoint is not known ahead: the snapshot must be of the
        weights before forward), with easgd/local_sgd or with host groups (their
        workers wait for whole pulls anyway)."""
        setting = self.job.transport.pull_overlap
        if setting != "auto":
            return bool(setting)
        c = self.job.consistency
        # Factor broadcast: a broadcast weight exists only once the whole pull is in.
        return (not self.step_gate and c.easgd is None and c.local_sgd is None
                and self.host_groups() is None and not self.job.transport.factor_broadcast)

    def host_group_shm(self) -> str:
        """The prefix of the host groups' shared-memory names: the run's random job
        number, so no two runs (nor a guessing local user) share a segment."""
        return f"/pstrain-{self.job_key:016x}"

    def io_threads(self, role: str) -> int:
        """ps-worker's and ps-server's --io-threads: transport.io_threads, or for auto 1 on
        one machine (ipc, loopback tcp, or every process on one host: the cores compute)
        and, for a job over hosts, one a connection up to AUTO_IO_THREADS: a worker's to
        each shard, a shard's from each pusher (with one push per host only the hosts'
        leaders connect). CURVE, required between hosts, takes about 0.6 ns a byte on a
        thread (docs/scaling.md E14)."""
        n = self.job.transport.io_threads
        if n != "auto":
            return n
        c = self.job.cluster
        if c.hosts == "local" or self.job.transport.kind != "tcp":
            return 1
        workers = self.layout.worker_hosts()
        if workers is not None and len(set(workers) | set(self.layout.server_hosts() or [])) <= 1:
            return 1
        return max(1, min(AUTO_IO_THREADS, c.servers if role == "worker" else self.pushers()))

    def pushers(self) -> int:
        """The connections each shard serves: every worker, or one a host group."""
        groups = self.host_groups()
        return self.job.cluster.workers if groups is None else max(groups) + 1

    def server_threads(self, shard: int) -> str:
        """ps-server --threads: cluster.server_threads, or for auto the cores of
        this machine shared by every process of the job here (at least 1); a
        server on another host takes auto there (the cores it may run on)."""
        n = self.job.cluster.server_threads
        if n != "auto":
            return str(n)
        if self.layout.server_address(shard) is not None:
            return "auto"
        processes = self.job.cluster.servers + self.job.cluster.workers
        return str(max(1, len(os.sched_getaffinity(0)) // processes))

    def server_command(self, shard: int, coordinator: str | None) -> list[str]:
        j = self.job
        groups = self.host_groups()
        pushers = self.pushers()
        cmd = [str(self.server_bin), "--shard", str(shard), "--num-servers", str(j.cluster.servers),
               "--workers", str(pushers), "--bind", self.bind_address(shard),
               "--solver", str(self.solver_copy), "--mode", j.consistency.mode,
               "--staleness", str(j.consistency.staleness), "--chunk-bytes",
               str(j.transport.chunk_bytes), "--job-key", str(self.wire_job_key),
               "--shared-memory-mb", str(j.transport.shared_memory_mb), "--idle-exit-s",
               str(SERVER_IDLE_EXIT_S), "--json",
               "--nonfinite", j.security.nonfinite] + self.security_args()
        if groups is not None:
            cmd += ["--average-over", str(j.cluster.workers)]
        if self.step_gate:
            cmd.append("--step-gate")
        if j.cluster.server_device != "cpu":
            cmd += ["--device", j.cluster.server_device]
        cmd += ["--threads", self.server_threads(shard)]
        if (io := self.io_threads("server")) != 1:
            cmd += ["--io-threads", str(io)]
        if self.pull_overlap():
            cmd.append("--pull-overlap")
        cmd += self.method_flags()
        if shard > 0 and coordinator:
            cmd += ["--coordinator", coordinator]
        address = self.layout.server_address(shard)
        if address is not None:
            cmd += ["--advertise", address]
        if self.resume_manifest is not None:
            cmd += ["--resume", str(self.resume_manifest)]
        return cmd

    def method_flags(self) -> list[str]:
        """The servers' flags for consistency.backup_workers, staleness_lr, dc_asgd,
        staleness_per_worker."""
        c = self.job.consistency
        flags: list[str] = []
        if c.staleness_per_worker:
            flags += ["--staleness-per-worker", ",".join(map(str, c.staleness_per_worker))]
        if c.backup_workers:
            flags += ["--backup-workers", str(c.backup_workers)]
        if c.staleness_lr:
            flags.append("--staleness-lr")
        elastic = c.easgd or c.local_sgd
        if elastic is not None:
            flags += ["--elastic", "--exchange-period", str(elastic.tau)]
        if c.dc_asgd is not None:
            flags += ["--dc-lambda", repr(c.dc_asgd.lambda_)]
            if c.dc_asgd.adaptive:
                flags += ["--dc-adaptive", "--dc-momentum", repr(c.dc_asgd.momentum),
                          "--dc-epsilon", repr(c.dc_asgd.epsilon)]
        return flags

    def forward_shards(self) -> list[list[int]] | None:
        """transport.factor_right: holder: per worker rank, the shards it forwards R's to
        (docs/architecture.md, "R pushed once"): shard k's forwarder is the lowest-ranked
        worker on shard k's host (per_host: server k runs on the k-th worker host), so the
        forward never crosses a NIC; a shard on a host without workers (first_slots) takes
        worker k mod W. None where the hosts are not known here (every process on this
        machine, or Slurm before srun): ps-worker's default, k mod W."""
        servers, workers = self.layout.server_hosts(), self.layout.worker_hosts()
        if servers is None or workers is None:
            return None
        out: list[list[int]] = [[] for _ in workers]
        for k, host in enumerate(servers):
            local = [w for w, h in enumerate(workers) if h == host]
            out[local[0] if local else k % len(workers)].append(k)
        return out

    def worker_command(self, rank: int, endpoints: list[str]) -> list[str]:
        j = self.job
        cmd = [str(self.worker_bin), "--solver", str(self.solver_copy), "--rank", str(rank),
               "--workers", str(j.cluster.workers), "--servers", ",".join(endpoints),
               "--job-key", str(self.wire_job_key), "--mode", j.consistency.mode,
               "--staleness", str(j.consistency.staleness), "--chunk-bytes",
               str(j.transport.chunk_bytes), "--shared-memory-mb",
               str(j.transport.shared_memory_mb), "--threads", str(j.cluster.threads_per_worker),
               "--engine", j.engine, "--timeout-s",
               str(GATED_WORKER_TIMEOUT_S if self.step_gate else WORKER_TIMEOUT_S), "--json"]
        cmd += self.security_args()
        if (io := self.io_threads("worker")) != 1:
            cmd += ["--io-threads", str(io)]
        if rank == 0 and self.initial_weights and self.resume_manifest is None:
            # Caffe's -weights syntax: files loaded in order, a later one wins per layer.
            cmd += ["--weights", ",".join(str(w) for w in self.initial_weights)]
        if self.worker_gpu(rank) is not None:
            cmd += ["--gpu", "0"]
        groups = self.host_groups()
        if groups is not None:
            cmd += ["--host-groups", ",".join(map(str, groups)),
                    "--host-group-shm", self.host_group_shm()]
        address = self.layout.worker_address(rank)
        if address is not None:
            cmd += ["--advertise", address]
        for layer, files in self.memory_data.items():
            cmd += ["--memory-data", f"{layer}={files[0][1]},{files[1][1]}"]
        e = j.consistency
        if e.easgd is not None:
            cmd += ["--elastic", "easgd", "--exchange-period", str(e.easgd.tau),
                    "--elastic-alpha", repr(e.easgd.alpha)]
        elif e.local_sgd is not None:
            cmd += ["--elastic", "average", "--exchange-period", str(e.local_sgd.tau)]
        c = j.transport.compression
        if c.method != "none":
            cmd += ["--compression", c.method]
            if c.method == "topk":
                cmd += ["--topk-ratio", repr(c.ratio)]
            if not c.error_feedback:
                cmd.append("--no-error-feedback")
        if j.transport.pull_compression != "none":
            cmd += ["--pull-compression", j.transport.pull_compression]
        if j.transport.sufficient_factors:
            cmd.append("--sufficient-factors")
        if j.transport.factor_broadcast:
            # The replica is compared with the shards' weights at every snapshot.
            snapshot = _int_field(SolverText(self.run_dir / "solver.prototxt",
                                             self.solver_text.splitlines()), "snapshot", 0)
            cmd.append("--factor-broadcast")
            if snapshot > 0:
                cmd += ["--factor-verify-interval", str(snapshot)]
            if j.transport.factor_right == "holder":
                cmd += ["--factor-right", "holder"]
                forwarders = self.forward_shards()
                if forwarders is not None:
                    mine = forwarders[rank]
                    cmd += ["--forward-shards", ",".join(map(str, mine)) if mine else "none"]
        if self.pull_overlap():
            cmd.append("--pull-overlap")
        if j.transport.gpu_ipc is not False:  # ps-worker's default is false
            cmd += ["--gpu-ipc", "auto" if j.transport.gpu_ipc == "auto" else "true"]
        s = j.cluster.straggler
        if s is not None and s.rank == rank:
            cmd += ["--straggle-ms", str(s.delay_ms), "--straggle-jitter-ms", str(s.jitter_ms)]
        return cmd

    def describe(self) -> str:
        """The resolved job and every command line (endpoints as placeholders)."""
        servers = self.job.cluster.servers
        endpoints = [f"<server-{k} endpoint>" for k in range(servers)]
        lines = [f"# warning: {w}" for w in self.warnings]
        lines += ["# resolved job", self.job.to_yaml().rstrip(), "", "# processes",
                  f"# {self.job_key_note()}"]
        for k in range(servers):
            place = self.layout.where("server", k)
            where = f"# on {place}\n" if place else ""
            lines.append(where + shlex.join(self.server_command(k, endpoints[0])))
        for r in range(self.job.cluster.workers):
            gpu = self.worker_gpu(r)
            prefix = f"CUDA_VISIBLE_DEVICES={gpu} " if gpu is not None else ""
            place = self.layout.where("worker", r)
            where = f"# on {place}\n" if place else ""
            lines.append(where + prefix + shlex.join(self.worker_command(r, endpoints)))
        return "\n".join(lines)


def make_plan(job: JobConfig, source: str, *, layout: Layout,
              resume_manifest: pathlib.Path | None = None, preparing_data: bool = False,
              step_gate: bool = False, initial_model: pathlib.Path | None = None) -> Plan:
    """Checks the solver, its nets and their data; raises JobError. `layout`: where
    the job's launcher runs each process (its `layout(job, source)`, which checks
    the cluster section)."""
    if not job.solver.is_file():
        raise JobError(f"{source}: solver: file not found: {job.solver}")
    solver = SolverText.read(job.solver)
    caffe = caffe_schema.messages()
    if caffe is not None:
        try:
            caffe_schema.check_solver(job.solver, caffe)
        except caffe_schema.SchemaError as e:
            raise JobError(f"{source}: solver: {e}") from None
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
        if caffe is not None:
            try:
                problems = caffe_schema.check_net(found, caffe)
            except caffe_schema.SchemaError as e:
                raise JobError(f"{source}: solver: {job.solver}: {field}: {e}") from None
            if problems:
                raise JobError(f"{source}: solver: {job.solver}: {problems[0]}")
        text, absent = absolute_net_text(found)
        nets[copy_name] = (found, text)
        missing += [f"{found}:{m.line}: layer '{m.layer}': data source '{m.path}'"
                    for m in absent]
        replacements.setdefault(field, []).append(copy_name)
    run_dir = job.run_dir
    for field, copies in replacements.items():
        solver.replace(field, [format_value("string", str(run_dir / c)) for c in copies])
    warnings: list[str] = []
    prefix = run_dir / "snapshots" / job.name
    theirs = solver.get("snapshot_prefix")
    if theirs and theirs[-1] != str(prefix):
        warnings.append(f"{job.solver}: snapshot_prefix \"{theirs[-1]}\" is replaced by the run "
                        f"folder's {prefix} (a job's snapshots and checkpoints stay in its "
                        f"run folder)")
    solver.replace("snapshot_prefix", [format_value("string", str(prefix))])
    for name, value in job.solver_overrides.items():
        kind, _ = SOLVER_FIELDS[name]
        values = value if isinstance(value, list) else [value]
        solver.replace(name, [format_value(kind, v) for v in values])
    initial_weights = _initial_weights(job, source, solver, resume_manifest, warnings)
    if initial_model is not None and resume_manifest is None:
        initial_weights = [run_dir / "initial.caffemodel"]
    if missing and not preparing_data:
        raise JobError(f"{source}: solver: {job.solver}: {missing[0]} not found "
                       f"(set data.prepare, or convert the data first)")
    max_iter = _int_field(solver, "max_iter", 0)
    if max_iter < 1:
        raise JobError(f"{source}: solver_overrides.max_iter: the solver must train at least one "
                       f"iteration, got max_iter {max_iter}")
    c = job.consistency
    elastic = c.easgd or c.local_sgd
    if elastic is not None:
        name = "easgd" if c.easgd is not None else "local_sgd"
        snapshot = _int_field(solver, "snapshot", 0)
        if max_iter % elastic.tau or snapshot % elastic.tau:
            raise JobError(f"{source}: consistency.{name}.tau: max_iter ({max_iter}) and snapshot "
                           f"({snapshot}) must be multiples of tau ({elastic.tau})")
    batch = batch_size(next(iter(nets.values()))[1]) if nets else 0
    _factor_warnings(job, source, solver, layout, warnings)
    if job.transport.kind == "ipc":
        longest = len(str(run_dir / "sockets" / f"server-{job.cluster.servers - 1}.sock"))
        if longest > 100:
            raise JobError(f"{source}: transport.kind: ipc socket paths under {run_dir} are too "
                           f"long for Unix sockets ({longest} > 100 characters); use tcp or a "
                           f"shorter output folder")
    for layer, paths in (job.data.memory_data if job.data is not None else {}).items():
        for what, path in zip(("data", "labels"), paths):
            if not path.is_file():
                raise JobError(f"{source}: data.memory_data.{layer}.{what}: file not found: "
                               f"{path}")
    plan = Plan(job=job, source=source, run_dir=run_dir, solver_text=solver.text(), nets=nets,
                missing_sources=missing, max_iter=max_iter,
                test_interval=_int_field(solver, "test_interval", 0), batch=batch,
                job_key=secrets.randbits(62) + 1, server_bin=programs.find_program("ps-server"),
                worker_bin=programs.find_program("ps-worker"), layout=layout,
                resume_manifest=resume_manifest, initial_weights=initial_weights,
                warnings=warnings, step_gate=step_gate,
                initial_model=initial_model if resume_manifest is None else None)
    # Host aggregation pushes each host's dense sum: sufficient factors are off then.
    if plan.host_groups() is not None and job.transport.factor_broadcast:
        raise JobError(f"{source}: transport.sufficient_factors: broadcast needs each worker's "
                       f"own factors, host aggregation pushes each host's dense sum "
                       f"(set transport.host_aggregation: auto or false)")
    if plan.host_groups() is not None and job.transport.sufficient_factors:
        plan.warnings.append(f"{source}: transport.sufficient_factors: off (host aggregation "
                             f"pushes each host's dense sum; transport.host_aggregation: false "
                             f"pushes factors)")
    return plan


def _factor_warnings(job: JobConfig, source: str, solver: SolverText, layout,
                     warnings: list[str]) -> None:
    """transport.sufficient_factors where ps-worker pushes every gradient dense anyway
    (worker/ps/ps_worker.hpp): say so at plan time."""
    if not job.transport.sufficient_factors:
        return
    c = job.consistency
    clip = solver.get("clip_gradients")
    why = []
    if c.easgd is not None or c.local_sgd is not None:
        why.append("an elastic method pushes weight deltas")
    if c.mode != "bsp" and clip and float(clip[-1]) >= 0:
        why.append(f"{c.mode} with clip_gradients pushes every gradient with its norm")
    if job.transport.gpu_ipc is True:
        why.append("GPU IPC pushes hand every gradient over in device memory")
    for reason in why:
        warnings.append(f"{source}: transport.sufficient_factors: off ({reason})")
    if not job.transport.factor_broadcast:
        return
    # The relay reproduces one plain bsp step per iteration (server/factor_relay.hpp).
    refuse = list(why)
    if c.mode != "bsp":
        refuse.append(f"mode {c.mode}: only bsp steps are the same for every worker")
    if clip and float(clip[-1]) >= 0:
        refuse.append("clip_gradients scales a step by every shard's norm")
    if c.backup_workers:
        refuse.append("backup workers drop some workers' factors")
    if job.transport.pull_overlap is True:
        refuse.append("transport.pull_overlap: true (a broadcast weight exists only once the "
                      "whole pull is in; auto leaves it off)")
    if job.cluster.server_device != "cpu":
        refuse.append("the relay needs CPU shards (cluster.server_device: cpu)")
    if any(g is not None for g in layout.worker_gpus):
        refuse.append("GPU workers (the replica's rebuild and step run on CPU workers only)")
    if refuse:
        raise JobError(f"{source}: transport.sufficient_factors: broadcast is not possible here "
                       f"({'; '.join(refuse)}); use push")


def _initial_weights(job: JobConfig, source: str, solver: SolverText,
                     resume_manifest: pathlib.Path | None, warnings: list[str]
                     ) -> list[pathlib.Path]:
    """The .caffemodel files worker 0 starts from, as `caffe train` picks them: the
    job's weights: (Caffe's -weights) wins over the solver's weights: fields (after
    solver_overrides), which are taken out of the solver copy (worker 0 gets them as
    --weights). A resumed run starts from its checkpoint, as with Caffe's -snapshot:
    nothing to load."""
    theirs = weights_paths(solver)
    solver.remove("weights", "worker 0 gets them as --weights")
    if resume_manifest is not None:
        return []
    if job.weights:
        for path in job.weights:
            if not path.is_file():
                raise JobError(f"{source}: weights: file not found: {path}")
        if theirs:
            warnings.append(f"{job.solver}: weights {', '.join(theirs)} not loaded: the job's "
                            f"weights: {', '.join(map(str, job.weights))} takes precedence "
                            f"(as caffe train -weights does)")
        return list(job.weights)
    found = []
    for name in theirs:
        path = resolve_beside(name, job.solver.parent)
        if path is None or not path.is_file():
            raise JobError(f"{source}: solver: {job.solver}: weights file '{name}' not found "
                           f"(looked beside the solver and in the folders above it)")
        found.append(path)
    return found


def _int_field(solver: SolverText, name: str, default: int) -> int:
    values = solver.get(name)
    try:
        return int(values[-1]) if values else default
    except ValueError:
        return default
