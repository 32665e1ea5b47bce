"""The job model: dataclasses for every section of a job file, and the parser
that turns YAML (plus --set overrides) into a validated JobConfig.

Every problem is one JobError naming the source file and the dotted key, e.g.
"configs/x.yaml: cluster.workers: must be an integer >= 1, got 'two'".
Paths are resolved relative to the job file's folder (or, for a job built in
code, the current folder).
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import pathlib
import re
from typing import Any, Union

import yaml

from .errors import JobError
from .solver import check_override, normalize_override

MODES = ("bsp", "ssp", "asp")
ENGINES = ("auto", "fast", "reference")
TRANSPORTS = ("tcp", "ipc")
SHARED_MEMORY_MAX_MB = 4096  # common/transport/shared_ring.hpp kSharedRingMaxMb
IO_THREADS_MAX = 64          # ps-worker and ps-server --io-threads (transport::kIoThreadsMax)
AUTH = ("curve", "none")
NONFINITE = ("stop", "drop")
DATASETS = ("fashion-mnist",)
HOSTS = ("local", "hostfile", "slurm")
SERVER_PLACEMENTS = ("per_host", "first_slots")   # hosts.py
FACTOR_RIGHTS = ("every_shard", "holder")         # transport.factor_right
COMPRESSIONS = ("none", "fp16", "bf16", "topk", "sign")
PULL_COMPRESSIONS = ("none", "fp16", "bf16")  # transport.pull_compression


@dataclasses.dataclass
class StragglerConfig:
    """Slows one worker down: it sleeps delay_ms (+ a random 0..jitter_ms) every iteration."""

    rank: int = 1
    delay_ms: int = 0
    jitter_ms: int = 0


@dataclasses.dataclass
class ClusterConfig:
    servers: int | None = 1     # None: one a worker host (server_placement per_host), until
                                # the launcher places the job and sets the count
    server_device: str = "cpu"                      # cpu | gpu:N
    workers: int = 1
    worker_devices: Union[str, list[int]] = "cpu"   # cpu | auto | [GPU ids]
    threads_per_worker: int = 1
    server_threads: Union[str, int] = "auto"        # auto | N >= 1: threads applying pushes
    hosts: str = "local"                            # local | hostfile | slurm
    hostfile: pathlib.Path | None = None            # hosts: hostfile (Horovod's syntax)
    server_placement: str | None = None             # hostfile, slurm: per_host | first_slots
    straggler: StragglerConfig | None = None


@dataclasses.dataclass
class DcAsgdConfig:
    """Delay-compensated ASGD (Zheng et al. 2017); see docs/config-reference.md."""

    lambda_: float = 0.04    # the job file's key is `lambda`
    adaptive: bool = False   # DC-ASGD-a: lambda / (sqrt(mean square of g) + epsilon)
    momentum: float = 0.95   # of the mean square
    epsilon: float = 1e-7


@dataclasses.dataclass
class ElasticConfig:
    """EASGD / local SGD: workers train locally and exchange every tau iterations."""

    tau: int = 4             # iterations between exchanges
    alpha: float = 0.1       # the moving rate


@dataclasses.dataclass
class LocalSgdConfig:
    """Periodic model averaging: workers train locally, averaged every tau iterations."""

    tau: int = 4


@dataclasses.dataclass
class ConsistencyConfig:
    mode: str = "ssp"        # bsp | ssp | asp
    staleness: int = 2       # ssp bound; bsp is 0, asp unbounded
    staleness_per_worker: list[int] | None = None  # ssp: worker w's own bound (replaces staleness)
    backup_workers: int = 0  # bsp: a step takes the first workers - backup_workers gradients
    staleness_lr: bool = False          # ssp/asp: each gradient's step / max(1, staleness)
    dc_asgd: DcAsgdConfig | None = None  # ssp/asp: delay compensation
    easgd: ElasticConfig | None = None      # elastic averaging SGD
    local_sgd: LocalSgdConfig | None = None  # periodic model averaging


@dataclasses.dataclass
class CompressionConfig:
    """Gradient compression of pushes; see docs/config-reference.md."""

    method: str = "none"               # none | fp16 | bf16 | topk | sign
    ratio: float = 0.01                # topk: the fraction of each chunk's values sent
    error_feedback: bool = True        # topk, sign: carry what was not sent to the next push


@dataclasses.dataclass
class TransportConfig:
    kind: str = "tcp"                  # tcp | ipc
    interface: str = "127.0.0.1"       # tcp: the address servers bind
    chunk_bytes: int = 1 << 20
    shared_memory_mb: int = 16         # ipc: large payloads through shared-memory rings; 0 = off
    # ZeroMQ I/O threads of each worker and each shard: a worker's connection to shard k is
    # served by its thread k mod io_threads, a shard's connections by the least busy of its
    # threads when each connects, so the kernel copies and CURVE of the bytes spread over
    # that many cores (docs/architecture.md, "I/O threads"). auto: 1 on one machine; for
    # a job over hosts (tcp), a worker one a shard and a shard one a pusher, 8 at most.
    # Only timing changes.
    io_threads: Union[str, int] = "auto"
    compression: CompressionConfig = dataclasses.field(default_factory=CompressionConfig)
    # the encoding of pulled weights: none (float32) | fp16 | bf16; the shards' master
    # weights and history stay float32 (docs/config-reference.md, "16-bit pulls")
    pull_compression: str = "none"
    # Push an fc weight's gradient as its sufficient factors where batch x (in + out) <
    # in x out (CPU workers; docs/config-reference.md). YAML: false | true | push (= true) |
    # broadcast; held as False, True or "broadcast" (truthy: the push side is on). broadcast
    # (bsp): the pull brings such a weight as every worker's factors where those are fewer
    # bytes (sufficient-factor broadcasting); otherwise pulls stay dense.
    sufficient_factors: Union[bool, str] = False
    # With sufficient_factors: broadcast, where a worker pushes its R factor (batch x the
    # weight's row length): every_shard (each shard holding rows of the weight gets it with
    # its L columns) or holder (only the worker's holder shard, the one that relays it; the
    # other shards get it from a worker on their own host, which has it from the relay:
    # docs/config-reference.md, "R pushed once"). The same steps bit for bit, fewer bytes pushed.
    factor_right: str = "every_shard"
    # bsp: the workers of a host sum their gradients and push once (worker/ps/host_group.hpp);
    # auto: on when a host runs several workers of a bsp job
    host_aggregation: Union[bool, str] = "auto"       # auto | true | false
    # A worker starts each layer's forward once that layer's weights are pulled and the
    # servers answer pulls in forward order (docs/architecture.md, "Pulls in forward order");
    # auto: on except with a step gate (pstrain.DistributedSolver), easgd/local_sgd or
    # host aggregation. Only timing changes: the weights are the same bits either way.
    pull_overlap: Union[bool, str] = "auto"           # auto | true | false
    # GPU workers with a GPU shard on the same host, bsp: push gradients through CUDA IPC
    # (device memory) instead of the socket; auto: where every shard accepts (else the socket,
    # the reason in the worker's log); true: a refusal stops the worker (docs/config-reference.md)
    # Off by default until bench/gpu_check.sh has run the path on a GPU.
    gpu_ipc: Union[bool, str] = False                 # auto | true | false

    @property
    def factor_broadcast(self) -> bool:
        """transport.sufficient_factors: broadcast."""
        return self.sufficient_factors == "broadcast"


@dataclasses.dataclass
class DataConfig:
    prepare: str | None = None         # fashion-mnist: convert the default data if missing
    # MemoryData layers fed from .npy files: layer name -> [DATA.npy, LABELS.npy]
    # (ps-worker --memory-data; pstrain.DistributedSolver.set_input_arrays writes it).
    memory_data: dict[str, list[pathlib.Path]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RestartConfig:
    max_worker_restarts: int = 3
    max_server_restarts: int = 2      # whole-job restarts from the last complete checkpoint


@dataclasses.dataclass
class RemoteConfig:
    """How ps-train reaches the hosts of a hostfile (docs/user-guide.md, "Several hosts")."""

    ssh: str = "ssh"                                  # the OpenSSH client to run
    ssh_options: list[str] = dataclasses.field(default_factory=list)   # added after the defaults
    workdir: str = "{run_dir}"      # each host's copy of the run folder; {run_dir} {host} {name}
    program_dir: str = ""           # where ps-server/ps-worker are on the hosts ("": as here)
    srun_options: list[str] = dataclasses.field(default_factory=list)  # hosts: slurm


@dataclasses.dataclass
class SecurityConfig:
    """docs/security.md. `security: none` is shorthand for {auth: none}."""

    auth: str = "curve"                # curve: per-process keys, ZAP; none: one machine only
    nonfinite: str = "stop"            # a pushed NaN/inf: stop the job, or drop that push


@dataclasses.dataclass
class JobConfig:
    name: str
    solver: pathlib.Path
    solver_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Caffe's `train -weights`: .caffemodel files copied in order into worker 0's net by
    # layer name (layers they lack keep their fillers); the servers start from it. A
    # fresh run only. Empty: the solver's own weights fields, if any.
    weights: list[pathlib.Path] = dataclasses.field(default_factory=list)
    cluster: ClusterConfig = dataclasses.field(default_factory=ClusterConfig)
    consistency: ConsistencyConfig = dataclasses.field(default_factory=ConsistencyConfig)
    transport: TransportConfig = dataclasses.field(default_factory=TransportConfig)
    data: DataConfig | None = None
    output: pathlib.Path = pathlib.Path("runs")
    restart: RestartConfig = dataclasses.field(default_factory=RestartConfig)
    engine: str = "auto"
    remote: RemoteConfig = dataclasses.field(default_factory=RemoteConfig)
    security: SecurityConfig = dataclasses.field(default_factory=SecurityConfig)

    @property
    def run_dir(self) -> pathlib.Path:
        return self.output / self.name

    def to_dict(self) -> dict[str, Any]:
        """Plain data (paths as strings) in job-file form."""
        def plain(v: Any) -> Any:
            if isinstance(v, pathlib.Path):
                return str(v)
            if isinstance(v, dict):
                return {k.rstrip("_"): plain(x) for k, x in v.items()}
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v
        return plain(dataclasses.asdict(self))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# --- parsing --------------------------------------------------------------

class _Reader:
    """Reads typed values out of a nested dict, raising JobErrors that name the key."""

    def __init__(self, source: str, base_dir: pathlib.Path):
        self.source = source
        self.base_dir = base_dir

    def fail(self, key: str, message: str) -> JobError:
        return JobError(f"{self.source}: {key}: {message}")

    def section(self, data: dict, key: str, fields: tuple[str, ...], *,
                required: tuple[str, ...] = ()) -> dict:
        if not isinstance(data, dict):
            raise self.fail(key, f"must be a mapping, got {data!r}")
        for k in data:
            if k not in fields:
                dotted = f"{key}.{k}" if key else str(k)
                close = difflib.get_close_matches(str(k), fields, n=1)
                hint = f"; did you mean '{(key + '.') if key else ''}{close[0]}'?" if close else ""
                raise JobError(f"{self.source}: unknown key '{dotted}'{hint}")
        for k in required:
            if k not in data or data[k] is None:
                raise JobError(f"{self.source}: {key + '.' if key else ''}{k}: is required")
        return data

    def integer(self, data: dict, key: str, dotted: str, default: int, lo: int = 0) -> int:
        v = data.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise self.fail(dotted, f"must be an integer >= {lo}, got {v!r}")
        return v

    def boolean(self, data: dict, key: str, dotted: str, default: bool) -> bool:
        v = data.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(dotted, f"must be true or false, got {v!r}")
        return v

    def number(self, data: dict, key: str, dotted: str, default: float, *, lo: float,
               hi: float | None = None, lo_open: bool = False) -> float:
        v = data.get(key, default)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if ok:
            ok = (v > lo if lo_open else v >= lo) and (hi is None or v < hi)
        if not ok:
            bound = f"{'>' if lo_open else '>='} {lo:g}" + (f" and < {hi:g}" if hi is not None else "")
            raise self.fail(dotted, f"must be a number {bound}, got {v!r}")
        return float(v)

    def choice(self, data: dict, key: str, dotted: str, default: str,
               choices: tuple[str, ...]) -> str:
        v = data.get(key, default)
        if v not in choices:
            raise self.fail(dotted, f"must be one of {', '.join(choices)}, got {v!r}")
        return v

    def string(self, data: dict, key: str, dotted: str, default: str | None) -> str:
        v = data.get(key, default)
        if not isinstance(v, str) or not v:
            raise self.fail(dotted, f"must be a non-empty string, got {v!r}")
        return v

    def path(self, value: str, dotted: str) -> pathlib.Path:
        if "\0" in value:
            raise self.fail(dotted, f"contains a NUL character: {value!r}")
        try:
            p = pathlib.Path(value).expanduser()
            return p if p.is_absolute() else (self.base_dir / p).resolve()
        except (RuntimeError, OSError) as e:  # ~nosuchuser, a symlink loop
            raise self.fail(dotted, f"cannot expand {value!r}: {e}") from e


def parse_job(data: Any, source: str, base_dir: pathlib.Path) -> JobConfig:
    """Validates the types and values of a job dict; checks no file (see checks.py)."""
    r = _Reader(source, base_dir)
    if not isinstance(data, dict):
        raise JobError(f"{source}: a job file must be a mapping of keys, got {data!r}")
    top = tuple(f.name for f in dataclasses.fields(JobConfig))
    r.section(data, "", top, required=("name", "solver"))
    name = r.string(data, "name", "name", None)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise r.fail("name", f"must be letters, digits, '_', '.' or '-' (a folder name), got {name!r}")
    overrides = data.get("solver_overrides") or {}
    if not isinstance(overrides, dict):
        raise r.fail("solver_overrides", f"must be a mapping of solver fields, got {overrides!r}")
    overrides = {k: normalize_override(str(k), v) for k, v in overrides.items()}
    for k, v in overrides.items():
        problem = check_override(str(k), v)
        if problem:
            raise r.fail(f"solver_overrides.{k}", problem)
    job = JobConfig(
        name=name,
        solver=r.path(r.string(data, "solver", "solver", None), "solver"),
        solver_overrides=dict(overrides),
        weights=_weights(r, data.get("weights")),
        cluster=_cluster(r, data.get("cluster") or {}),
        consistency=_consistency(r, data.get("consistency") or {}, _workers(r, data)),
        transport=_transport(r, data.get("transport") or {}),
        data=_data(r, data.get("data")),
        output=r.path(r.string(data, "output", "output", "runs"), "output"),
        restart=_restart(r, data.get("restart") or {}),
        engine=r.choice(data, "engine", "engine", "auto", ENGINES),
        remote=_remote(r, data.get("remote") or {}),
        security=_security(r, data.get("security")),
    )
    _check_exposure(job, source)
    _check_host_aggregation(job, source)
    _check_gpu_ipc(job, source)
    return job


def _weights(r: _Reader, value: Any) -> list[pathlib.Path]:
    """`weights:` as paths (relative to the job file): one, several separated by commas
    as Caffe's -weights takes them, or a list; the files are checked in plan.py."""
    if value is None or value == []:
        return []
    names = value.split(",") if isinstance(value, str) else value
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n.strip() for n in names)):
        raise r.fail("weights", f"must be a .caffemodel path, several separated by commas, a "
                                f"list of them, or null; got {value!r}")
    return [r.path(n.strip(), "weights") for n in names]


def _auto_int(r: _Reader, d: dict, key: str, dotted: str, hi: int | None = None
              ) -> Union[str, int]:
    """`key` of `d`: auto (the default) or a whole number in [1, hi] (hi None: >= 1)."""
    v = d.get(key, "auto")
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1
                       and (hi is None or v <= hi)):
        return v
    bound = "an integer >= 1" if hi is None else f"an integer in [1, {hi}]"
    raise r.fail(dotted, f"must be auto or {bound}, got {v!r}")


def _cluster(r: _Reader, d: Any) -> ClusterConfig:
    fields = tuple(f.name for f in dataclasses.fields(ClusterConfig))
    r.section(d, "cluster", fields)
    hosts = r.choice(d, "hosts", "cluster.hosts", "local", HOSTS)
    placement = None
    if hosts != "local":
        value = d.get("server_placement")
        given = {"server_placement": "per_host" if value is None else value}
        placement = r.choice(given, "server_placement", "cluster.server_placement", "per_host",
                             SERVER_PLACEMENTS)
    elif d.get("server_placement") is not None:
        raise r.fail("cluster.server_placement", "is used only with hosts: hostfile or slurm "
                     "(hosts is 'local')")
    one_per_host = placement == "per_host" and d.get("servers") is None
    c = ClusterConfig(
        servers=None if one_per_host else r.integer(d, "servers", "cluster.servers", 1, lo=1),
        server_placement=placement,
        server_device=str(d.get("server_device", "cpu")),
        workers=r.integer(d, "workers", "cluster.workers", 1, lo=1),
        worker_devices=d.get("worker_devices", "cpu"),
        threads_per_worker=r.integer(d, "threads_per_worker", "cluster.threads_per_worker", 1,
                                     lo=0),
        server_threads=_auto_int(r, d, "server_threads", "cluster.server_threads"),
        hosts=hosts,
    )
    hostfile = d.get("hostfile")
    if c.hosts == "hostfile":
        if hostfile is None:
            raise r.fail("cluster.hostfile", "is required with hosts: hostfile (a file of "
                         "'host slots=N' lines)")
        c.hostfile = r.path(r.string(d, "hostfile", "cluster.hostfile", None), "cluster.hostfile")
    elif hostfile is not None:
        raise r.fail("cluster.hostfile", f"is used only with hosts: hostfile (hosts is "
                     f"{c.hosts!r})")
    if not re.fullmatch(r"cpu|gpu:\d+", c.server_device):
        raise r.fail("cluster.server_device", f"must be cpu or gpu:N, got {c.server_device!r}")
    wd = c.worker_devices
    if isinstance(wd, list):
        if not wd or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in wd):
            raise r.fail("cluster.worker_devices",
                         f"must be cpu, auto or a list of GPU ids (integers >= 0), got {wd!r}")
    elif wd not in ("cpu", "auto"):
        raise r.fail("cluster.worker_devices",
                     f"must be cpu, auto or a list of GPU ids, got {wd!r}")
    s = d.get("straggler")
    if s is not None:
        r.section(s, "cluster.straggler", ("rank", "delay_ms", "jitter_ms"), required=("rank",))
        c.straggler = StragglerConfig(
            rank=r.integer(s, "rank", "cluster.straggler.rank", 0),
            delay_ms=r.integer(s, "delay_ms", "cluster.straggler.delay_ms", 0),
            jitter_ms=r.integer(s, "jitter_ms", "cluster.straggler.jitter_ms", 0))
        if c.straggler.rank >= c.workers:
            raise r.fail("cluster.straggler.rank",
                         f"must be in [0, {c.workers}) (cluster.workers is {c.workers}), "
                         f"got {c.straggler.rank}")
    return c


def _consistency(r: _Reader, d: Any, workers: int) -> ConsistencyConfig:
    r.section(d, "consistency", ("mode", "staleness", "staleness_per_worker", "backup_workers",
                                 "staleness_lr", "dc_asgd", "easgd", "local_sgd"))
    mode = r.choice(d, "mode", "consistency.mode", "ssp", MODES)
    staleness = r.integer(d, "staleness", "consistency.staleness", 2 if mode == "ssp" else 0)
    c = ConsistencyConfig(mode, 0 if mode == "bsp" else staleness)
    per_worker = d.get("staleness_per_worker")
    if per_worker is not None:
        key = "consistency.staleness_per_worker"
        if mode != "ssp":
            raise r.fail(key, f"applies to mode ssp only (mode is {mode})")
        if (not isinstance(per_worker, list) or len(per_worker) != workers
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in per_worker)):
            raise r.fail(key, f"must be a list of {workers} integers >= 0 (one per worker), "
                         f"got {per_worker!r}")
        c.staleness_per_worker = list(per_worker)
    c.backup_workers = r.integer(d, "backup_workers", "consistency.backup_workers", 0)
    if c.backup_workers > 0 and mode != "bsp":
        raise r.fail("consistency.backup_workers", f"applies to mode bsp only (mode is {mode})")
    if c.backup_workers >= workers:
        raise r.fail("consistency.backup_workers",
                     f"must be less than cluster.workers ({workers}), got {c.backup_workers}")
    c.staleness_lr = r.boolean(d, "staleness_lr", "consistency.staleness_lr", False)
    if c.staleness_lr and mode == "bsp":
        raise r.fail("consistency.staleness_lr", "applies to modes ssp and asp only (bsp "
                     "gradients are never stale)")
    dc = d.get("dc_asgd")
    if dc is not None:
        key = "consistency.dc_asgd"
        if mode == "bsp":
            raise r.fail(key, "applies to modes ssp and asp only (bsp gradients are never stale)")
        r.section(dc, key, ("lambda", "adaptive", "momentum", "epsilon"))
        c.dc_asgd = DcAsgdConfig(
            lambda_=r.number(dc, "lambda", f"{key}.lambda", 0.04, lo=0, lo_open=True),
            adaptive=r.boolean(dc, "adaptive", f"{key}.adaptive", False),
            momentum=r.number(dc, "momentum", f"{key}.momentum", 0.95, lo=0, hi=1),
            epsilon=r.number(dc, "epsilon", f"{key}.epsilon", 1e-7, lo=0, lo_open=True))
    for name in ("easgd", "local_sgd"):
        e = d.get(name)
        if e is None:
            continue
        key = f"consistency.{name}"
        r.section(e, key, ("tau", "alpha") if name == "easgd" else ("tau",))
        other = [k for k in ("backup_workers", "staleness_lr", "dc_asgd", "staleness_per_worker",
                             "local_sgd" if name == "easgd" else "easgd") if d.get(k)]
        if other:
            raise r.fail(key, f"cannot be combined with consistency.{other[0]}")
        tau = r.integer(e, "tau", f"{key}.tau", 4, lo=1)
        if name == "easgd":
            c.easgd = ElasticConfig(tau=tau, alpha=r.number(e, "alpha", f"{key}.alpha", 0.1, lo=0,
                                                            hi=1.0000001, lo_open=True))
        else:
            c.local_sgd = LocalSgdConfig(tau=tau)
    return c


def _workers(r: _Reader, data: dict) -> int:
    cluster = data.get("cluster") or {}
    return r.integer(cluster, "workers", "cluster.workers", 1, lo=1) if isinstance(cluster, dict) else 1


def _transport(r: _Reader, d: Any) -> TransportConfig:
    r.section(d, "transport", ("kind", "interface", "chunk_bytes", "shared_memory_mb", "io_threads",
                               "compression", "pull_compression", "sufficient_factors",
                               "factor_right", "host_aggregation", "pull_overlap", "gpu_ipc"))
    c = d.get("compression") or {}
    if isinstance(c, str):  # compression: fp16 is short for {method: fp16}
        c = {"method": c}
    key = "transport.compression"
    r.section(c, key, ("method", "ratio", "error_feedback"))
    compression = CompressionConfig(
        method=r.choice(c, "method", f"{key}.method", "none", COMPRESSIONS),
        ratio=r.number(c, "ratio", f"{key}.ratio", 0.01, lo=0, lo_open=True),
        error_feedback=r.boolean(c, "error_feedback", f"{key}.error_feedback", True))
    if compression.ratio > 1:
        raise r.fail(f"{key}.ratio", f"must be a number > 0 and <= 1, got {compression.ratio!r}")
    factors = _sufficient_factors(r, d)
    factor_right = r.choice(d, "factor_right", "transport.factor_right", "every_shard",
                            FACTOR_RIGHTS)
    if factor_right != "every_shard" and factors != "broadcast":
        raise r.fail("transport.factor_right", f"{factor_right} needs "
                     f"transport.sufficient_factors: broadcast (R reaches the other shards "
                     f"through the relay), got sufficient_factors: {d.get('sufficient_factors')!r}")
    return TransportConfig(
        kind=r.choice(d, "kind", "transport.kind", "tcp", TRANSPORTS),
        interface=r.string(d, "interface", "transport.interface", "127.0.0.1"),
        chunk_bytes=r.integer(d, "chunk_bytes", "transport.chunk_bytes", 1 << 20, lo=1024),
        shared_memory_mb=_bounded(r, d, "shared_memory_mb", 16, 0, SHARED_MEMORY_MAX_MB),
        io_threads=_auto_int(r, d, "io_threads", "transport.io_threads", IO_THREADS_MAX),
        compression=compression,
        pull_compression=r.choice(d, "pull_compression", "transport.pull_compression", "none",
                                  PULL_COMPRESSIONS),
        sufficient_factors=factors,
        factor_right=factor_right,
        host_aggregation=_auto_bool(r, d, "host_aggregation"),
        pull_overlap=_auto_bool(r, d, "pull_overlap"),
        gpu_ipc=_auto_bool(r, d, "gpu_ipc", default=False))


def _check_gpu_ipc(job: JobConfig, source: str) -> None:
    """gpu_ipc: true needs what the path needs (common/transport/gpu_path.hpp): GPU workers,
    a GPU shard, bsp without backup workers, float32 pushes, no host aggregation."""
    if job.transport.gpu_ipc is not True:
        return
    c = job.consistency
    why = None
    if job.cluster.worker_devices == "cpu":
        why = "GPU workers (cluster.worker_devices is cpu)"
    elif job.cluster.server_device == "cpu":
        why = "a GPU shard (cluster.server_device is cpu)"
    elif c.mode != "bsp":
        why = f"consistency.mode bsp (got {c.mode})"
    elif c.backup_workers:
        why = "no consistency.backup_workers"
    elif c.easgd is not None or c.local_sgd is not None:
        why = "no consistency.easgd or local_sgd (they push weight deltas)"
    elif job.transport.compression.method != "none":
        why = "no transport.compression (it encodes on the host)"
    elif job.transport.host_aggregation is True:
        why = "no transport.host_aggregation (a host's sum is made in host memory)"
    if why:
        raise JobError(f"{source}: transport.gpu_ipc: true needs {why}")


def _sufficient_factors(r: _Reader, d: dict) -> bool | str:
    """transport.sufficient_factors as False, True (push) or "broadcast"."""
    v = d.get("sufficient_factors", False)
    if isinstance(v, bool):
        return v
    if not isinstance(v, str) or v not in ("push", "broadcast", "false"):
        raise r.fail("transport.sufficient_factors",
                     f"must be false, true, push or broadcast, got {v!r}")
    return {"push": True, "false": False}.get(v, v)


def _auto_bool(r: _Reader, d: dict, key: str, default: bool | str = "auto") -> bool | str:
    """transport.<key>: auto, true or false; absent or null: `default`."""
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, bool) and v != "auto":
        raise r.fail(f"transport.{key}", f"must be auto, true or false, got {v!r}")
    return v


def _check_host_aggregation(job: JobConfig, source: str) -> None:
    """host_aggregation: true needs lock-step workers (bsp, no backup workers, no local
    steps): in ssp and asp each worker pushes on its own clock."""
    if job.transport.host_aggregation is not True:
        return
    c = job.consistency
    why = None
    if c.mode != "bsp":
        why = f"consistency.mode bsp (got {c.mode}: each worker pushes on its own clock)"
    elif c.backup_workers:
        why = "no consistency.backup_workers (a step would drop a whole host's sum)"
    elif c.easgd is not None or c.local_sgd is not None:
        why = "no consistency.easgd or local_sgd (their workers step on their own)"
    if why:
        raise JobError(f"{source}: transport.host_aggregation: true needs {why}")


def _bounded(r: _Reader, d: dict, key: str, default: int, lo: int, hi: int) -> int:
    """transport.<key>: an integer in [lo, hi]."""
    v = d.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise r.fail(f"transport.{key}", f"must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _security(r: _Reader, d: Any) -> SecurityConfig:
    if d is None:
        return SecurityConfig()
    if isinstance(d, str):
        if d not in AUTH:
            raise r.fail("security", f"must be curve, none or a mapping (auth, nonfinite), "
                                     f"got {d!r}")
        return SecurityConfig(auth=d)
    r.section(d, "security", ("auth", "nonfinite"))
    return SecurityConfig(auth=r.choice(d, "auth", "security.auth", "curve", AUTH),
                          nonfinite=r.choice(d, "nonfinite", "security.nonfinite", "stop",
                                             NONFINITE))


def is_loopback(interface: str) -> bool:
    """True for an interface only this machine reaches (127.0.0.0/8, ::1, localhost, lo)."""
    return (interface.startswith("127.") or interface in ("::1", "[::1]", "localhost", "lo"))


def _check_exposure(job: JobConfig, source: str) -> None:
    """Without CURVE, servers may bind loopback only: anyone who can reach them can
    push, pull and stop them."""
    t = job.transport
    if job.security.auth == "none" and t.kind == "tcp" and not is_loopback(t.interface):
        raise JobError(f"{source}: transport.interface: {t.interface} can be reached from other "
                       f"hosts, and security is none (no CURVE): use security: curve, or "
                       f"interface 127.0.0.1")


def _data(r: _Reader, d: Any) -> DataConfig | None:
    if d is None:
        return None
    r.section(d, "data", ("prepare", "memory_data"))
    prepare = d.get("prepare")
    if prepare is not None and prepare not in DATASETS:
        raise r.fail("data.prepare", f"must be one of {', '.join(DATASETS)} or null, got {prepare!r}")
    return DataConfig(prepare, _memory_data(r, d.get("memory_data")))


def _memory_data(r: _Reader, d: Any) -> dict[str, list[pathlib.Path]]:
    """data.memory_data: {LAYER: {data: X.npy, labels: Y.npy}} (or [X.npy, Y.npy])."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise r.fail("data.memory_data", f"must be a mapping of MemoryData layer names to "
                                         f"{{data: X.npy, labels: Y.npy}}, got {d!r}")
    files: dict[str, list[pathlib.Path]] = {}
    for layer, spec in d.items():
        key = f"data.memory_data.{layer}"
        if not isinstance(layer, str) or not layer or "=" in layer:
            raise r.fail("data.memory_data", f"{layer!r} is not a layer name (a non-empty "
                                             f"string without '=')")
        if isinstance(spec, dict):
            r.section(spec, key, ("data", "labels"), required=("data", "labels"))
            pair = [spec["data"], spec["labels"]]
        elif isinstance(spec, list) and len(spec) == 2:
            pair = spec
        else:
            raise r.fail(key, f"must be {{data: X.npy, labels: Y.npy}} or [X.npy, Y.npy], "
                              f"got {spec!r}")
        paths = []
        for what, value in zip(("data", "labels"), pair):
            if not isinstance(value, str) or not value:
                raise r.fail(f"{key}.{what}", f"must be a .npy path, got {value!r}")
            if "," in value:
                raise r.fail(f"{key}.{what}", f"{value!r}: a path with a comma cannot be "
                                              f"passed to ps-worker --memory-data; rename it")
            paths.append(r.path(value, f"{key}.{what}"))
        files[layer] = paths
    return files


def _restart(r: _Reader, d: Any) -> RestartConfig:
    r.section(d, "restart", ("max_worker_restarts", "max_server_restarts"))
    return RestartConfig(r.integer(d, "max_worker_restarts", "restart.max_worker_restarts", 3),
                         r.integer(d, "max_server_restarts", "restart.max_server_restarts", 2))


def _remote(r: _Reader, d: Any) -> RemoteConfig:
    r.section(d, "remote", ("ssh", "ssh_options", "workdir", "program_dir", "srun_options"))
    options = d.get("ssh_options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) and o for o in options):
        raise r.fail("remote.ssh_options", f"must be a list of ssh arguments (strings), e.g. "
                     f"['-o', 'Port=2222'], got {options!r}")
    srun = d.get("srun_options", [])
    if not isinstance(srun, list) or not all(isinstance(o, str) and o for o in srun):
        raise r.fail("remote.srun_options", f"must be a list of srun arguments (strings), e.g. "
                     f"['--gpus-per-task=1'], got {srun!r}")
    workdir = r.string(d, "workdir", "remote.workdir", "{run_dir}")
    try:
        workdir.format(run_dir="/r", host="h", name="n")
    except (KeyError, IndexError, ValueError) as e:
        raise r.fail("remote.workdir", f"may use {{run_dir}}, {{host}} and {{name}} only, got "
                     f"{workdir!r} ({e})") from e
    program_dir = d.get("program_dir", "") or ""
    if not isinstance(program_dir, str):
        raise r.fail("remote.program_dir", f"must be a folder path, got {program_dir!r}")
    return RemoteConfig(ssh=r.string(d, "ssh", "remote.ssh", "ssh"), ssh_options=list(options),
                        workdir=workdir, program_dir=program_dir, srun_options=list(srun))


# --- overrides --------------------------------------------------------------

def apply_overrides(data: dict, overrides: dict[str, Any] | list[str] | None,
                    source: str) -> dict:
    """Sets dotted keys in a copy of the job dict. A list holds "key=value" strings
    whose values are read as YAML ("2" is an integer, "[0, 1]" a list, "null" None)."""
    import copy
    data = copy.deepcopy(data) if isinstance(data, dict) else data
    if not overrides:
        return data
    if isinstance(overrides, list):
        pairs: dict[str, Any] = {}
        for item in overrides:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise JobError(f"{source}: --set {item!r}: expected dotted.key=value")
            try:
                pairs[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError as e:
                raise JobError(f"{source}: --set {key}: cannot read {raw!r} as YAML: "
                               f"{yaml_problem(e)}") from e
            except RecursionError as e:
                raise JobError(f"{source}: --set {key}: nested too deeply") from e
        overrides = pairs
    if not isinstance(data, dict):
        return data
    for key, value in overrides.items():
        parts = key.split(".")
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise JobError(f"{source}: {'.'.join(parts[:i + 1])}: is not a mapping, "
                               f"cannot set {key}")
            node = child
        node[parts[-1]] = value
    return data


def load_yaml(path: pathlib.Path) -> Any:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise JobError(f"{path}: cannot read the job file: {e.strerror}") from e
    except UnicodeDecodeError as e:
        line = text_line(path.read_bytes(), e.start)
        raise JobError(f"{path}:{line}: not UTF-8 text (byte {e.start})") from e
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        if isinstance(e, yaml.reader.ReaderError):  # a character YAML does not allow
            where = f":{text.count(chr(10), 0, e.position) + 1}"
        raise JobError(f"{path}{where}: not valid YAML: {yaml_problem(e)}") from e
    except RecursionError as e:  # "[[[[..." deeper than Python's stack
        raise JobError(f"{path}: not valid YAML: nested too deeply") from e


def yaml_problem(e: yaml.YAMLError) -> str:
    """What PyYAML found wrong, on one line (its full text spans several, with the place)."""
    problem = getattr(e, "problem", None) or (str(e).splitlines() or [type(e).__name__])[0]
    return " ".join(problem.split())


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte `offset` in `data`."""
    return data.count(b"\n", 0, offset) + 1
