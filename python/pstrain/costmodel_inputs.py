"""The cost model's inputs (costmodel.py, docs/scaling.md): per-layer compute
times from `ps-net time --json` and the learnable parameters of a net, as the
engine builds it (engine.py)."""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib

from . import engine
from .errors import JobError


class CostModelError(JobError):
    """Unusable input to the cost model; the message names the file and line or layer."""


# ---------------------------------------------------------------- inputs

@dataclasses.dataclass(frozen=True)
class LayerTime:
    name: str
    forward_ms: float
    backward_ms: float


def load_layer_times(path: str | pathlib.Path) -> list[LayerTime]:
    """The layer_time events of a `ps-net time --json` output, in forward order."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CostModelError(f"{path}: cannot read the layer times: {e.strerror}") from None
    layers = []
    median = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            raise CostModelError(f"{path}:{number}: not a JSON line ({e.msg})") from None
        if isinstance(event, dict) and event.get("event") == "time":
            median = event.get("median_total_ms")
            continue
        if not isinstance(event, dict) or event.get("event") != "layer_time":
            continue
        try:
            f, b = float(event["forward_ms"]), float(event["backward_ms"])
            name = str(event["layer"])
        except (KeyError, TypeError, ValueError):
            raise CostModelError(f"{path}:{number}: a layer_time event needs layer, forward_ms "
                                 "and backward_ms (numbers)") from None
        if not (math.isfinite(f) and math.isfinite(b)) or f < 0 or b < 0:
            raise CostModelError(f"{path}:{number}: layer \"{name}\": times must be finite and "
                                 ">= 0")
        layers.append(LayerTime(name, f, b))
    if not layers:
        raise CostModelError(f"{path}: no layer_time events (the output of `ps-net time --json`)")
    # The per-layer figures are means; the time event's median of whole iterations resists
    # the outliers a shared machine adds (a preempted layer). Keep the layers' proportions,
    # scale them to the median.
    total = sum(l.forward_ms + l.backward_ms for l in layers)
    if isinstance(median, (int, float)) and math.isfinite(median) and median > 0 and total > 0:
        k = median / total
        layers = [LayerTime(l.name, l.forward_ms * k, l.backward_ms * k) for l in layers]
    return layers


@dataclasses.dataclass(frozen=True)
class Param:
    layer: str
    name: str
    values: int
    # an InnerProduct weight (blob 0, 2-D): (rows, cols) = (num_output, inputs), whose
    # gradient over a batch is the product of its sufficient factors (E1b); None otherwise
    fc_shape: tuple[int, int] | None = None


# pycaffe's convention for a layer's blobs: params[name][0] the weights, [1] the biases.
_BLOB_ROLES = ("weight", "bias")


def net_params(path: str | pathlib.Path) -> list[Param]:
    """The parameters that learn in the TRAIN-phase net, as the engine builds it
    (engine.net_shapes: no activations allocated), in the order ps-worker registers
    them, a shared one once: lr_mult != 0 and a gradient computed (`learns`). So
    BatchNorm's statistics (no gradient; Caffe's solver never updates them) and
    parameters with `param { lr_mult: 0 }` stay out. A parameter is named
    "<layer>/weight", "<layer>/bias" (its blob 0, 1; "<layer>/<i>" after) or by its
    ParamSpec name."""
    path = pathlib.Path(path)
    try:
        net = engine.net_shapes(path)
    except (ValueError, RuntimeError, OSError) as e:   # the engine's message, file:line
        raise CostModelError(f"{path}: {e}" if str(path) not in str(e) else str(e)) from None
    types = {l["name"]: l["type"] for l in net["layers"]}
    params = []
    for p in net["params"]:
        if p["lr_mult"] == 0 or not p["learns"]:
            continue
        name = p["name"]
        if name == f"{p['layer']}/{p['index']}" and p["index"] < len(_BLOB_ROLES):
            name = f"{p['layer']}/{_BLOB_ROLES[p['index']]}"
        fc = (tuple(p["shape"]) if types.get(p["layer"]) == "InnerProduct" and p["index"] == 0
              and len(p["shape"]) == 2 else None)
        params.append(Param(p["layer"], name, p["count"], fc))
    return params


# ---------------------------------------------------------------- the cluster

@dataclasses.dataclass(frozen=True)
class Cluster:
    """One job's shape and the measured constants. Bandwidths in bytes/s per direction
    (links are full duplex), latency one way in s."""

    workers: int
    servers: int
    mode: str = "bsp"                 # bsp, ssp, asp
    staleness: int = 0
    worker_bw: float = 1.25e9         # a worker's NIC
    server_bw: float = 1.25e9         # a server's NIC, shared by the W workers
    latency_s: float = 50e-6
    message_s: float = 20e-6          # per message, at each end (framing, syscalls, wake-ups)
    server_byte_s: float = 0.0        # server CPU per byte of one worker's gradient (receive,
                                      # apply, reply)
    server_threads: int = 1           # threads a shard applies a push on (ps-server
                                      # --threads): its wall time per byte is
                                      # server_byte_s / server_threads (E3, E5, E6c)
    worker_byte_s: float = 0.0        # worker CPU per byte and direction (staging, copies)
    kernel_byte_s: float = 0.0        # CPU of the host's TCP stack per byte moved (loopback
                                      # and veth: 1/bandwidth of loopback; offloading NIC: ~0)
    server_kernel_byte_s: float = 0.0  # the server host's TCP stack CPU per byte of one
                                      # worker's gradient (in and out) beyond server_byte_s:
                                      # 0 where c_s was measured on the same kind of link
    chunk_bytes: int = 1 << 20
    cores: float | None = None        # CPU cores the processes share; None: dedicated devices
    background: float = 0.0           # other programs busy during the job (runnable threads,
                                      # or autogroups where the kernel shares by session)
    timed_background: float = 0.0     # ... while the layer times were taken
    early_pull: bool = False          # bsp CPU workers request the next pull before backward
    # ssp/asp pulls beside the pushes (after_push, docs/wire-protocol.md): the reply streams
    # chunk by chunk as this worker's push is applied (E4''); False: answered whole (E4')
    streamed_pulls: bool = True
    link_kernel_byte_s: float = 0.0   # the worker's TCP stack per byte in series with a shaped
                                      # link's wire, at the CPU share (E2b); 0: a plain NIC
    burst_bytes: float = 0.0          # a shaped link's token bucket (tbf burst): bytes that
                                      # pass at once after it idled; 0 for a plain NIC
    compute_in_job: bool = False      # the layer times were measured inside the job itself
                                      # (contention included): no E6/E6b, E6c stays
    # E8: CPU seconds of every thread of the worker process (training thread and ZeroMQ I/O
    # thread) and of the servers, per push+pull exchange with one shard and per byte of one
    # worker's gradient, measured with ps-bench's threads (bench/scaling_cpu.py). When any
    # is set, E8 (all of the job's CPU on `cores`) replaces E6b.
    worker_cpu_exchange_s: float = 0.0
    worker_cpu_byte_s: float = 0.0
    server_cpu_exchange_s: float = 0.0
    server_cpu_byte_s: float = 0.0
    # E9: the training thread's extra CPU (cache refills) per unit of the share of its core
    # that other threads take, from `ps-net time` pinned to one core beside another busy
    # program (bench/scaling_cpu.py --interference); 0: none
    refill_per_share: float = 0.0
    # E10: bsp with W > C not a multiple of the cores: after the barrier the cores that got
    # fewer training threads run dry first and idle until the kernel's load balancer moves a
    # waiting thread to them; this is that latency, measured with W processes that spin a
    # fixed CPU time between barriers (bench/scaling_cpu.py --barrier); 0: none
    balance_s: float = 0.0
    # ---- issue 32's switches (docs/scaling.md E1, E1b, E3, E11, E12, E13). The defaults are the
    # behaviour before them: the stored validation runs replay unchanged.
    # E1: bytes on the wire per value: pushes (transport.compression) and pulls
    # (transport.pull_compression); value_bytes() turns the job's settings into them
    push_value_bytes: float = 4.0
    pull_value_bytes: float = 4.0
    # E11: hosts. workers_per_host m: the workers that share one host's NIC (worker_bw is
    # then the host's link); servers_beside_workers: cluster.server_placement per_host,
    # shard k on worker host k, its traffic on that host's NIC; host_aggregation
    # (transport.host_aggregation): one push and one pull per host (bsp), the sum made in
    # shared memory after the last backward, host_sum_byte_s a member's gradient byte
    host_aggregation: bool = False
    workers_per_host: int = 1
    servers_beside_workers: bool = False
    host_sum_byte_s: float = 0.0
    # E1b: sufficient factors (ps-worker --sufficient-factors): an InnerProduct weight whose
    # factors are fewer bytes than its gradient is pushed as them (float32, per shard the
    # rows its chunks span and every column, `batch` samples); the shard rebuilds each chunk
    # with a GEMM (server_flop_s: its CPU seconds per flop)
    sufficient_factors: bool = False
    server_flop_s: float = 0.0
    # E13: sufficient-factor broadcasting (transport.sufficient_factors: broadcast; bsp): the
    # pull of a factored weight is every pusher's factors, relayed by the shards (per shard
    # the L rows its chunks touch from all P pushers and the R factors of the pushers it is
    # the holder for), and every worker rebuilds and applies the step on its replica:
    # worker_flop_s per flop of the rebuild GEMM (2 P b r c a weight), worker_apply_byte_s per
    # float32 byte of the update rule's step. factor_value_bytes: a factor value on the wire,
    # both ways (4: float32, as built; 2: 16-bit factors, not built)
    factor_broadcast: bool = False
    factor_value_bytes: float = 4.0
    worker_flop_s: float = 0.0
    worker_apply_byte_s: float = 0.0
    # E3: the shard's ZeroMQ I/O thread and its kernel, CPU per byte on the wire and
    # direction: a rate its links cannot exceed (min(β_s, 1/this)); 0: the NIC sets it
    server_io_byte_s: float = 0.0
    # E2c: a NIC moves a worker's bytes by DMA while its CPU (c_w, the stack) prepares the
    # next ones: per piece the worker's link takes max(wire, CPU), not their sum. False:
    # in series, as on loopback and the validation's veth links, where the CPU is the wire
    pipelined_nic: bool = False
    # E12: pulls overlapping the next forward, in forward order (transport.pull_overlap): the
    # worker starts layer l's forward once the weights layer l reads are in; a shard sends
    # its ready replies earliest forward position first, with pull_window_bytes queued per
    # worker ahead of the wire (a reply that becomes ready later overtakes all but those).
    # False: the next forward waits for the whole pull (PsWorker::OnStart's WaitPull)
    pull_overlap: bool = False
    pull_window_bytes: float = float(2 << 20)   # ps-server --pull-window-kb 2048

    def pushers(self) -> tuple[int, int]:
        """E11: (the pushers every shard serves, the pushers on one host)."""
        m = max(1, self.workers_per_host)
        if self.host_aggregation and self.mode == "bsp":
            return math.ceil(self.workers / m), 1
        return self.workers, min(m, self.workers)


def value_bytes(method: str, ratio: float = 0.01) -> float:
    """E1: payload bytes per value of an encoding (docs/wire-protocol.md): none 4, fp16
    and bf16 2, topk 8 * ratio (an index and a value per sent value), sign 1/8 (one bit;
    the per-chunk scale is left out). Pulls take none, fp16 or bf16."""
    widths = {"none": 4.0, "fp16": 2.0, "bf16": 2.0, "sign": 0.125}
    if method == "topk":
        return 8.0 * ratio
    if method not in widths:
        raise CostModelError(f"compression must be one of none, fp16, bf16, topk, sign, "
                             f"got {method!r}")
    return widths[method]
