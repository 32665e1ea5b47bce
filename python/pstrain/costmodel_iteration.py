"""The cost model of one PSTrain iteration: the servers' placement of the chunks, a job's
shape and constants (Cluster), the messages of one worker's exchange (pieces) and the
iteration time with its bottleneck (predict). docs/scaling.md derives and documents every
equation; the comments below name them (E1..E15). The link stations (E2e) are in
costmodel_links.py, the inputs (layer times, parameters) in costmodel_inputs.py, the
command line (python3 -m pstrain.costmodel) in costmodel.py, which re-exports these names.
"""
from __future__ import annotations

import dataclasses
import math

from . import engine
from .costmodel_inputs import CostModelError, LayerTime, Param
from .costmodel_links import _share, _share_links


# ---------------------------------------------------------------- placement

@dataclasses.dataclass(frozen=True)
class Chunk:
    param: int
    values: int
    shard: int
    offset: int = 0                   # the chunk's first value in its parameter


def place(sizes: list[int], servers: int, chunk_bytes: int) -> list[Chunk]:
    """The servers' own placement (common/ps/key_placement.hpp, asked through
    engine.key_placement): chunks of at most chunk_bytes in parameter order, largest
    first (ties: lower id) to the lightest shard (ties: lower shard)."""
    try:
        chunks = engine.key_placement(sizes, servers, chunk_bytes)
    except (ValueError, RuntimeError) as e:
        raise CostModelError(f"key placement: {e}") from None
    return [Chunk(param, length, shard, offset) for _, param, offset, length, shard in chunks]


# ---------------------------------------------------------------- the model

def _server_wall_byte_s(cl: "Cluster") -> float:
    """E3/E5/E6c: a shard's wall time per gradient byte: its CPU per byte (c_s) split
    among the threads that apply a push (each chunk's values cut among them)."""
    return cl.server_byte_s / max(1, cl.server_threads)


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
    # E2d: ZeroMQ I/O threads of a worker (transport.io_threads): the part of worker_byte_s
    # spent on its I/O threads (worker_io_share; ps-bench 16M on the EPYC: 0.77 of the worker
    # process's CPU per byte) spreads over min(io_threads, servers) threads, one connection
    # to a shard on each; the rest stays on the worker's own thread. The wall time per byte
    # is worker_wall_byte_s(); the CPU counted in E6 and E8 stays worker_byte_s.
    worker_io_threads: int = 1
    worker_io_share: float = 0.77
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
    # shards on server hosts of their own, `server_hosts` of them, shard k on host k mod n,
    # the shards of a host sharing its NIC (the validation's network namespaces: every shard
    # behind one shaped link); 0: each shard has a NIC of its own
    server_hosts: int = 0
    host_sum_byte_s: float = 0.0
    # E1b: sufficient factors (ps-worker --sufficient-factors): an InnerProduct weight whose
    # factors are fewer bytes than its gradient is pushed as them (factor_value_bytes a
    # value, per shard the rows its chunks span and every column, `batch` samples; the
    # rule compares float32 bytes, the same choice in 16 bits); the shard rebuilds each chunk
    # with a GEMM (server_flop_s: its CPU seconds per flop)
    sufficient_factors: bool = False
    server_flop_s: float = 0.0
    # E13: sufficient-factor broadcasting (transport.sufficient_factors: broadcast; bsp): the
    # pull of a factored weight is every pusher's factors, relayed by the shards (per shard
    # the L rows its chunks touch from all P pushers and the R factors of the pushers it is
    # the holder for), and every worker rebuilds and applies the step on its replica:
    # worker_flop_s per flop of the rebuild GEMM (2 P b r c a weight), worker_apply_byte_s per
    # float32 byte of the update rule's step. factor_value_bytes: a factor value on the wire,
    # both ways (4: float32; 2: 16-bit factors, which CPU workers send when their pushes are
    # fp16 or bf16 -- the factor PUSH takes transport.compression and the shards relay its
    # bytes as pushed; the CLI's --factor-bytes follows --compression so)
    factor_broadcast: bool = False
    factor_value_bytes: float = 4.0
    # E13, issue 32 (transport.factor_right; docs/architecture.md "R pushed once"): where R
    # goes. "every_shard" (as built): a worker pushes its R factor (batch x cols) to every
    # shard holding rows of the weight. "holder": only to its holder shard (RelayHolder,
    # holders[w % n]); every other shard k of the weight gets the R's it lacks from a
    # forwarder worker that has them from the relay. With servers_beside_workers that
    # worker is on shard k's host (loopback: no NIC bytes, the shard's and the worker's
    # stack still move them: Piece.forwarded); apart, the forwarder's uplink carries them
    # (the same bytes as every_shard, averaged over the workers). Either way the shard's
    # step of the weight waits for the forwarder to receive every pusher's R (all P R's on
    # its downlink at its full rate; the holders send them ahead of the step, so the replies
    # after it carry only the L's: Piece.early_reply)
    factor_right: str = "every_shard"
    worker_flop_s: float = 0.0
    worker_apply_byte_s: float = 0.0
    # E3: the shard's ZeroMQ I/O threads and its kernel, CPU per byte on the wire and
    # direction: a rate its links cannot exceed (min(β_s, n_s/(this + curve_byte_s)), n_s
    # its server_io_threads serving its pushers, E14); 0: the NIC sets it
    server_io_byte_s: float = 0.0
    # E14: CURVE (security: curve, which ps-train requires between hosts): CPU seconds a byte
    # on the wire takes on the ZeroMQ I/O thread of each end (the sender encrypts, the
    # receiver decrypts), message by message beside the wire: a rate the link cannot
    # exceed. A worker's spread over min(worker_io_threads, servers) threads as E2d's; a
    # shard's over its server_io_threads (ps-server --io-threads), which also divide
    # server_io_byte_s (E3). E8's constants are measured as the job runs, CURVE on or off,
    # so E14 adds to the links' rates and to E6b's CPU, not to E8; 0: no CURVE
    curve_byte_s: float = 0.0
    server_io_threads: int = 1
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
    # E15: the share of each link's rate that a bsp exchange among hosts gets over TCP. The
    # flows of an iteration do not share the links evenly, a chunk's step waits for its
    # slowest push and the next iteration for the slowest reply, so a link idles while its
    # host waits. Measured on the network with the exchange's own pattern and no PSTrain
    # program (bench/exchange_probe.py; on the validation's 200 Mbit/s links with BBR, of
    # TCP's rate and of the shaped rate: docs/scaling.md E15). bsp over more than one host
    # with a shard on every host (the probe's all-to-all; not one shard beside some hosts'
    # workers, a star) takes every link at this share of its rate. 1: links kept busy
    # (the model before E15)
    exchange_efficiency: float = 1.0

    def worker_wall_byte_s(self) -> float:
        """E2d: the worker's CPU per byte on its critical path."""
        n = max(1, min(self.worker_io_threads, self.servers))
        share = min(1.0, max(0.0, self.worker_io_share))
        return self.worker_byte_s * ((1.0 - share) + share / n)

    def worker_link_bw(self) -> float:
        """E14: the rate of a worker's (its host's) link per direction: its NIC, or its
        pushers' I/O threads encrypting and decrypting (CURVE) if slower."""
        if self.curve_byte_s <= 0:
            return self.worker_bw
        # the connections whose bytes cross the NIC: not the one to the shard beside
        remote = self.servers - 1 if self.servers_beside_workers and self.servers > 1 \
            else self.servers
        threads = max(1, min(self.worker_io_threads, remote)) * self.pushers()[1]
        return min(self.worker_bw, threads / self.curve_byte_s)

    def hosts(self) -> int:
        """E11: the worker hosts, workers_per_host workers on each."""
        return math.ceil(self.workers / max(1, self.workers_per_host))

    def pushers(self) -> tuple[int, int]:
        """E11: (the pushers every shard serves, the pushers on one host)."""
        if self.host_aggregation and self.mode == "bsp":
            return self.hosts(), 1
        return self.workers, min(max(1, self.workers_per_host), self.workers)


FACTOR_RIGHTS = ("every_shard", "holder")   # E13: where a worker pushes its R factor


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


@dataclasses.dataclass(frozen=True)
class Piece:
    """One message of one worker's push to one shard: a layer's chunks on the shard (E1)."""
    shard: int
    values: int                       # dense values (the shard applies these)
    push: float                       # bytes on the wire, push
    pull: float                       # bytes on the wire, pull reply
    staged: float                     # bytes the worker stages (float32 gradient or factors)
    flops: float = 0.0                # the shard's GEMM rebuilding factored chunks, per pusher
    # E13: float32 bytes the worker stages of the reply (None: the piece's dense values), the
    # worker's rebuild flops and the float32 bytes of its replica's step
    pull_staged: float | None = None
    worker_flops: float = 0.0
    replica_bytes: float = 0.0
    # E13 with factor_right "holder": bytes of R factors the shard gets per pusher from a
    # worker on its own host (loopback, not the NIC), and the bytes of R the forwarder must
    # receive before this shard can rebuild (0: it holds every R it needs)
    forwarded: float = 0.0
    forward_wait: float = 0.0
    # E13 holder: bytes of this piece's reply that are R factors: the holder sends them ahead
    # of the step (the forwarder needs them before the other shards can rebuild), so the
    # reply after the step carries the rest; the link's busy time still counts them
    early_reply: float = 0.0


def _factor_rows(chunks: list[Chunk], cols: int) -> tuple[int, int]:
    """E1b: (rows spanned, rows touched summed over chunks) of one weight's chunks on one
    shard, as PsClient::PushFactors sends them (common/ps/sufficient_factors.hpp)."""
    first = min(c.offset // cols for c in chunks)
    last = max((c.offset + c.values - 1) // cols for c in chunks)
    touched = sum((c.offset + c.values - 1) // cols - c.offset // cols + 1 for c in chunks)
    return last - first + 1, touched


def _rows_touched(chunks: list[Chunk], cols: int) -> int:
    """E13: the distinct rows of one weight that its chunks on one shard hold values of."""
    rows: set[int] = set()
    for c in chunks:
        rows.update(range(c.offset // cols, (c.offset + c.values - 1) // cols + 1))
    return len(rows)


def pieces(layers: list[LayerTime], params: list[Param], batch: int, cl: "Cluster"
           ) -> dict[str, list[Piece]]:
    """E1, E1b, E13: every layer's messages, shard by shard, with their bytes each way."""
    by_layer = _layer_chunks(layers, params, cl)
    P = cl.pushers()[0]
    out: dict[str, list[Piece]] = {}
    for layer, chunks in by_layer.items():
        out[layer] = []
        for k in sorted({c.shard for c in chunks}):
            mine = [c for c in chunks if c.shard == k]
            values = sum(c.values for c in mine)
            push = pull = staged = flops = 0.0
            relay = None                      # E13: float32 bytes of relayed factors
            dense_staged = worker_flops = replica = forwarded = forward_wait = early = 0.0
            for i in sorted({c.param for c in mine}):
                part = [c for c in mine if c.param == i]
                n = sum(c.values for c in part)
                dense_push, dense_pull = cl.push_value_bytes * n, cl.pull_value_bytes * n
                factors = _factors(params[i], i, by_layer[layer], batch, cl)
                if factors is None:
                    push, pull, staged = push + dense_push, pull + dense_pull, staged + 4.0 * n
                    dense_staged += 4.0 * n
                    continue
                rows, cols = params[i].fc_shape
                span, touched = _factor_rows(part, cols)
                holders = sorted({c.shard for c in by_layer[layer] if c.param == i})
                relayed = len(range(holders.index(k), P, len(holders)))
                # R to this shard: from every pusher, or (holder) from the pushers it holds
                # for, per pusher on average; the others' R's come forwarded
                rights = 1.0 if cl.factor_right == "every_shard" else relayed / P
                sent = 4.0 * batch * (span + rights * cols)
                push += sent * cl.factor_value_bytes / 4.0
                staged += sent
                if rights < 1.0:
                    lacking = (1.0 - rights) * batch * cols * cl.factor_value_bytes
                    if cl.servers_beside_workers:
                        forwarded += lacking
                    else:
                        push += lacking
                    forward_wait = max(forward_wait, P * batch * cols * cl.factor_value_bytes)
                flops += 2.0 * touched * cols * batch
                if not cl.factor_broadcast:
                    pull += dense_pull
                    dense_staged += 4.0 * n
                    continue
                # E13: the L rows its chunks touch from all P pushers, and the R factors of
                # the pushers w this shard holds for (holders[w % n], n holder shards)
                factor_values = P * batch * _rows_touched(part, cols) + relayed * batch * cols
                pull += cl.factor_value_bytes * factor_values
                relay = (relay or 0.0) + 4.0 * factor_values
                if cl.factor_right == "holder":
                    early += cl.factor_value_bytes * relayed * batch * cols
                worker_flops += 2.0 * P * batch * n
                replica += 4.0 * n
            out[layer].append(Piece(k, values, push, pull, staged, flops,
                                    None if relay is None else dense_staged + relay,
                                    worker_flops, replica, forwarded, forward_wait, early))
    return out


def _factors(param: Param, index: int, chunks: list[Chunk], batch: int, cl: "Cluster"):
    """E1b: whether `param` goes as sufficient factors: an InnerProduct weight whose factors,
    summed over the shards holding its chunks, are fewer float32 bytes than its gradient
    (FactorCapture::Create's rule; factor_right "holder" leaves it as it is, R counted per
    shard, so that the switch changes no weight's path). None when it does not."""
    if not (cl.sufficient_factors or cl.factor_broadcast) or param.fc_shape is None:
        return None
    rows, cols = param.fc_shape
    mine = [c for c in chunks if c.param == index]
    sent = sum(4.0 * batch * (_factor_rows([c for c in mine if c.shard == k], cols)[0] + cols)
               for k in {c.shard for c in mine})
    return sent if sent < 4.0 * rows * cols else None


@dataclasses.dataclass
class Prediction:
    iteration_s: float
    images_per_s: float
    compute_s: float
    exposed_s: float                  # iteration_s - compute_s
    bottleneck: str                   # compute, shared cores, worker link, server link,
                                      # server cpu
    busy_s: dict                      # per resource, per iteration


def _layer_chunks(layers: list[LayerTime], params: list[Param], cl: Cluster):
    known = {l.name for l in layers}
    for p in params:
        if p.layer not in known:
            raise CostModelError(f"layer \"{p.layer}\" has parameters but no layer_time event: "
                                 "time and net files do not belong together")
    chunks = place([p.values for p in params], cl.servers, cl.chunk_bytes)
    by_layer: dict[str, list[Chunk]] = {l.name: [] for l in layers}
    for c in chunks:
        by_layer[params[c.param].layer].append(c)
    return by_layer


def predict(layers: list[LayerTime], params: list[Param], batch: int, cl: Cluster) -> Prediction:
    if cl.workers < 1 or cl.servers < 1 or batch < 1:
        raise CostModelError("workers, servers and batch must be >= 1")
    if cl.mode not in ("bsp", "ssp", "asp"):
        raise CostModelError(f"mode must be bsp, ssp or asp, got {cl.mode!r}")
    if cl.factor_broadcast and cl.mode != "bsp":
        raise CostModelError("factor_broadcast (E13, transport.sufficient_factors: broadcast) "
                             f"is bsp only, got mode {cl.mode!r}")
    if cl.pull_overlap and cl.mode != "bsp" and not cl.streamed_pulls:
        raise CostModelError("pull_overlap (E12) needs pulls answered chunk by chunk "
                             "(streamed_pulls) in ssp and asp")
    if cl.server_io_threads < 1 or cl.curve_byte_s < 0:
        raise CostModelError(f"server_io_threads must be >= 1 and curve_byte_s >= 0, got "
                             f"{cl.server_io_threads} and {cl.curve_byte_s}")
    if cl.worker_io_threads < 1 or not 0.0 <= cl.worker_io_share <= 1.0:
        raise CostModelError(f"worker_io_threads must be >= 1 and worker_io_share in [0, 1], "
                             f"got {cl.worker_io_threads} and {cl.worker_io_share}")
    if cl.factor_right not in FACTOR_RIGHTS:
        raise CostModelError(f"factor_right must be one of {', '.join(FACTOR_RIGHTS)}, got "
                             f"{cl.factor_right!r}")
    if cl.factor_right != "every_shard" and not cl.factor_broadcast:
        raise CostModelError(f"factor_right {cl.factor_right!r} needs factor_broadcast (E13: "
                             "R reaches the other shards through the relay)")
    if cl.factor_value_bytes <= 0 or cl.pull_window_bytes < 0:
        raise CostModelError("factor_value_bytes must be > 0 and pull_window_bytes >= 0, got "
                             f"{cl.factor_value_bytes} and {cl.pull_window_bytes}")
    if not 0.0 < cl.exchange_efficiency <= 1.0:
        raise CostModelError(f"exchange_efficiency must be in (0, 1], got "
                             f"{cl.exchange_efficiency}")
    if (cl.mode == "bsp" and cl.servers_beside_workers and cl.hosts() > 1
            and cl.servers >= cl.hosts() and cl.exchange_efficiency < 1.0):
        # E15: every link at the share of its rate TCP's flows get in the hosts' exchange
        cl = dataclasses.replace(cl, worker_bw=cl.worker_bw * cl.exchange_efficiency,
                                 server_bw=cl.server_bw * cl.exchange_efficiency,
                                 exchange_efficiency=1.0)
    by_layer = pieces(layers, params, batch, cl)
    W, S = cl.workers, cl.servers
    P, p = cl.pushers()
    # per shard, one pusher's exchange: dense values, bytes on the wire each way, messages,
    # the rebuild's flops (E1, E1b)
    shard_values, shard_push, shard_pull = [0.0] * S, [0.0] * S, [0.0] * S
    shard_flops, shard_msgs, shard_forwarded = [0.0] * S, [0] * S, [0.0] * S
    for layer_pieces in by_layer.values():
        for c in layer_pieces:
            shard_forwarded[c.shard] += c.forwarded
            shard_msgs[c.shard] += 1
            shard_values[c.shard] += c.values
            shard_push[c.shard] += c.push
            shard_pull[c.shard] += c.pull
            shard_flops[c.shard] += c.flops
    # float32 bytes of the gradient: what c_s, k_s and the E6b/E8 CPU terms count
    shard_bytes = [4.0 * v for v in shard_values]
    total_bytes = sum(shard_bytes)
    staged = sum(c.staged for ps in by_layer.values() for c in ps)
    push_total, pull_total = sum(shard_push), sum(shard_pull)
    # what each shard's NIC carries: its own bytes, or with server_hosts its host's shards'
    link_push = [sum(shard_push[j] for j in range(S) if _server_host(cl, j) == _server_host(cl, k))
                 for k in range(S)]
    link_pull = [sum(shard_pull[j] for j in range(S) if _server_host(cl, j) == _server_host(cl, k))
                 for k in range(S)]
    msgs = sum(shard_msgs)
    server_byte = 1 / _server_link_bw(cl)

    def shard_cpu(k: int) -> float:
        """E3: a shard's wall time for one pusher's exchange (apply on p threads, the
        rebuild GEMM, its stack beyond c_s, two messages)."""
        return (shard_bytes[k] * _server_wall_byte_s(cl)
                + shard_flops[k] * cl.server_flop_s / max(1, cl.server_threads)
                + (shard_push[k] + shard_pull[k] + shard_forwarded[k]) / 2
                * cl.server_kernel_byte_s
                + 2 * shard_msgs[k] * cl.message_s)
    # E11: one host's NIC carries its p pushers' bytes; with servers beside the workers,
    # also its shard's bytes from and to the other hosts' pushers, not its own
    own_push = shard_push[0] if cl.servers_beside_workers else 0.0
    own_pull = shard_pull[0] if cl.servers_beside_workers else 0.0
    host_up = p * (push_total - own_push) + (P - p) * own_pull
    host_down = p * (pull_total - own_pull) + (P - p) * own_push
    # E5: per-iteration busy time of the shared resources (per direction of a link)
    host_wire, host_cpu = (max(host_up, host_down) / cl.worker_link_bw(),
                           p * staged * cl.worker_wall_byte_s())
    busy = {
        "worker link": (max(host_wire, host_cpu) if cl.pipelined_nic else host_wire + host_cpu)
        + p * msgs * cl.message_s,
        "server link": 0.0 if cl.servers_beside_workers else
        max(P * max(a, b) * server_byte for a, b in zip(link_push, link_pull)),
        "server cpu": max(P * shard_cpu(k) for k in range(S)),
    }

    # one worker's demand on each station of the busiest shard, per iteration
    def stations(slow: float) -> list[float]:
        # a link's token bucket passes up to burst_bytes of each worker's transfer at once
        # when the link idled before it (E2b)
        # E7b: with streamed pulls (E4'') a worker's reply leaves on the outlink while its
        # push still arrives on the inlink: the two directions of the full-duplex link are
        # one station with the demand of one direction.
        links = 1 if cl.streamed_pulls and cl.mode != "bsp" else 2
        return max(([max(0.0, (a if links == 2 else max(a, b)) - cl.burst_bytes) * server_byte,
                     shard_cpu(k) * slow]
                    + [max(0.0, b - cl.burst_bytes) * server_byte] * (links - 1)
                    for k, (a, b) in enumerate(zip(link_push, link_pull))), key=sum)
    fwd = sum(l.forward_ms for l in layers) / 1e3
    bwd = sum(l.backward_ms for l in layers) / 1e3
    # E6: CPU contention: W workers, the servers' busy share and other busy programs share
    # `cores`; the layer times were taken by one process beside timed_background others.
    scale, it, cpu_bound, slow = 1.0, fwd + bwd, 0.0, 1.0
    timed = 1.0 if cl.cores is None else max(1.0, (1 + cl.timed_background) / cl.cores)
    # CPU work for one worker's communication per iteration, wherever it runs: its client
    # copies and messages, the kernel moving its bytes both ways, the servers' work on them
    forwarded = sum(shard_forwarded)   # E13 holder: R's handed over on a host, per pusher
    comm_cpu = (2 * staged * cl.worker_byte_s
                + (push_total + pull_total + forwarded) * cl.kernel_byte_s
                + 4 * msgs * cl.message_s + total_bytes * cl.server_byte_s
                + 2 * (push_total + pull_total) * cl.curve_byte_s    # E14: both ends
                + (push_total + pull_total + forwarded) / 2 * cl.server_kernel_byte_s)
    sync = _lockstep(cl)
    # E8: the CPU one worker's communication costs, all threads of the worker and the servers
    e8 = cl.cores is not None and (cl.worker_cpu_exchange_s or cl.worker_cpu_byte_s or
                                   cl.server_cpu_exchange_s or cl.server_cpu_byte_s) > 0
    shards_used = sum(1 for m in shard_msgs if m)
    e8_cpu = (shards_used * (cl.worker_cpu_exchange_s + cl.server_cpu_exchange_s)
              + total_bytes * (cl.worker_cpu_byte_s + cl.server_cpu_byte_s))
    # E1b, E13 on shared cores: the CPU of the shards' rebuilds of one worker's factors and,
    # broadcast, of its own rebuild and step (0 without factors)
    factor_cpu = (sum(shard_flops) * cl.server_flop_s
                  + sum(c.worker_flops * cl.worker_flop_s + c.replica_bytes
                        * cl.worker_apply_byte_s for ps in by_layer.values() for c in ps))
    comm_cpu += factor_cpu
    e8_cpu += factor_cpu
    for _ in range((8 if e8 else 4) if cl.cores is not None else 0):
        busy_procs = W + min(S, busy["server cpu"] * S / max(it, 1e-9))
        demand = (busy_procs + cl.background) / cl.cores
        scale = 1.0 if cl.compute_in_job else max(1.0, demand) / timed
        # E6c: the server's CPU work (c_s: CPU seconds) runs at its share of the cores
        # beside the workers' mean busy share W·compute/T (the compute of the last step)
        computing = W * min(1.0, (fwd + bwd) * scale / max(it, 1e-9))
        slow = max(1.0, (computing + busy_procs - W + cl.background) / cl.cores)
        # E6b: with fewer compute threads than cores (W < C) the communication work runs on
        # a core no compute of this job uses; else, on saturated cores, it adds to the
        # compute, in the share of the cores that are busy.
        spill = 0.0 if W < cl.cores else min(1.0, demand)
        # (with one push per host only P of the W workers exchange, the others hand their
        # gradients over in shared memory: E11)
        handed = (W - P) / W * total_bytes * cl.host_sum_byte_s
        cpu_bound = 0.0 if cl.compute_in_job else \
            scale * (fwd + bwd + (comm_cpu * P / W + handed) * spill)
        path = _path(layers, by_layer, cl, scale, contended=sync, slow=slow)
        if e8 and not cl.compute_in_job:
            cpu_bound = _cpu_budget(cl, (fwd + bwd) / timed, e8_cpu, path - (fwd + bwd) * scale,
                                    it, total_bytes * cl.host_sum_byte_s)
        it = max(_bsp(path, busy, slow, cl) if sync else _mva(path, stations(slow), P),
                 cpu_bound)
    path = _path(layers, by_layer, cl, scale, contended=sync, slow=slow)
    # E7: asp/ssp: workers drift apart and queue at the busiest shard's links and CPU (a
    # closed network: mean value analysis). bsp: all workers contend at once, inside the
    # path (E2-E4).
    iteration = max(_bsp(path, busy, slow, cl) if sync else _mva(path, stations(slow), P),
                    cpu_bound)
    compute = (fwd + bwd) * scale
    if iteration - compute < 0.02 * iteration:
        neck = "compute"
    elif cpu_bound >= iteration:
        neck = "shared cores"
    else:
        busy["server cpu"] *= slow  # E6c: wall time at the server's share of the cores
        neck = max(busy, key=busy.get)
    return Prediction(iteration, W * batch / iteration, compute, iteration - compute, neck, busy)


def _cpu_budget(cl: Cluster, compute: float, comm_cpu: float, tail: float,
                previous: float, summed: float = 0.0) -> float:
    """E8: the CPU of the whole job on `cores` shared cores. Every worker's compute (CPU
    seconds: the layer times less the contention they were timed under) and communication
    CPU (its threads and its share of the servers') must fit on the cores the job gets beside
    `background` other programs (fair shares between W + S sessions and the others). bsp adds
    its barrier: for the tail after the last push (the path's exposed time) the workers wait
    and one server thread runs, so (C - 1)/C of the cores idle.
    E9: a training thread that shares its core loses CPU to cache refills, in proportion to
    the share phi of the core the job's other threads take (at the previous estimate of the
    iteration time `previous`): compute x (1 + refill_per_share x phi).
    E11 with E8: with one push per host only the P pushers exchange with the shards (the
    other members hand their gradients over in shared memory: host_sum_byte_s a byte,
    `summed` CPU seconds each)."""
    W = cl.workers
    P, _ = cl.pushers()
    share = cl.cores * (W + cl.servers) / (W + cl.servers + cl.background)
    comm = P * comm_cpu + (W - P) * summed
    total = W * compute + comm
    phi = min(1.0, max(0.0, (total - compute) / share / max(previous, 1e-9)))
    compute *= 1 + cl.refill_per_share * phi
    bound = (W * compute + comm) / share
    if _lockstep(cl):
        bound += max(0.0, tail) * (1 - 1 / cl.cores)
        bound += _balance_idle(W, cl.cores, compute, cl.balance_s) / cl.cores
    return bound


def _lockstep(cl: Cluster) -> bool:
    """E7c: the workers move in lock step: bsp, and ssp on oversubscribed shared cores
    (W + S processes on fewer cores). There the scheduler gives the workers unequal CPU
    shares for the whole job (measured 1.6x apart in asp, docs/scaling-history.md runs 12-13), so
    the fast ones keep reaching the staleness bound and wait for the slowest: ssp runs at
    bsp's pace, its slack only absorbing short jitter."""
    if cl.mode == "bsp":
        return True
    return (cl.mode == "ssp" and cl.cores is not None
            and cl.workers + cl.servers > cl.cores)


def _balance_idle(workers: int, cores: float, compute: float, latency: float) -> float:
    """E10: core-seconds a bsp iteration leaves idle because W compute threads do not divide
    evenly over C cores. The barrier releases all W at once; C - (W mod C) cores hold
    floor(W/C) threads and run dry a compute time c before the others; each then idles
    until the load balancer pulls a waiting thread over (`latency`), at most the c the
    fuller cores still have left. 0 for W <= C or W a multiple of C."""
    c = int(round(cores))
    if latency <= 0 or c < 1 or workers <= c or workers % c == 0:
        return 0.0
    return (c - workers % c) * min(latency, compute)


def _bsp(path: float, busy: dict, slow: float, cl: Cluster) -> float:
    """E7, bsp: one worker's path with W copies at the server, but no less than the busiest
    shard's CPU needs for the W workers' bytes at its share of the cores (E6c): its kernel
    work overlaps the transfer in the path, yet occupies the CPU. E11: where a host's NIC
    carries more than one worker's exchange (several workers, or its shard beside them),
    nor than that NIC needs for it. E12: with the pull under the next forward, no less
    than any link's bytes of an iteration need either."""
    hosts = cl.workers_per_host > 1 or cl.servers_beside_workers or cl.pull_overlap
    return max(path, busy["server cpu"] * slow, busy["worker link"] if hosts else 0.0,
               busy["server link"] if cl.pull_overlap else 0.0)


def _server_host(cl: Cluster, k: int) -> int:
    """The host of shard k: k mod server_hosts, or a host of its own (server_hosts 0)."""
    return k % cl.server_hosts if cl.server_hosts > 0 else k


def _server_link_bw(cl: Cluster) -> float:
    """E3: the rate of a shard's link per direction: its NIC, or its I/O threads if slower
    (their CPU per byte, CURVE's too: E14)."""
    # E14: a shard's connections, one a pusher, spread over its I/O threads
    threads = max(1, min(cl.server_io_threads, cl.pushers()[0]))
    io = (cl.server_io_byte_s + cl.curve_byte_s) / threads
    if io > 0:
        return min(cl.server_bw, 1 / io)
    return cl.server_bw


def _mva(path: float, demands: list[float], workers: int) -> float:
    """E7: exact mean value analysis of a closed network: `workers` jobs circulate through a
    delay (the rest of one worker's iteration) and processor-sharing stations (a server's
    inlink, CPU, outlink: TCP flows share a link fairly). Returns the iteration time."""
    think = max(0.0, path - sum(demands))
    queue = [0.0] * len(demands)
    throughput = 1.0 / path
    for n in range(1, workers + 1):
        residence = [d * (1 + q) for d, q in zip(demands, queue)]
        throughput = n / (think + sum(residence))
        queue = [throughput * r for r in residence]
    return workers / throughput


def _path(layers, by_layer, cl: Cluster, scale: float, contended: bool,
          slow: float = 1.0) -> float:
    """One worker's iteration: forward, backward with per-layer pushes (E2), the server's
    apply (E3), the pull replies chunk by chunk (E4). `contended`: all W workers send and
    receive at the same moments (bsp), so a server's link carries W copies (E11: the P
    pushers' copies, less those of its own host when it runs beside workers, and this
    worker's host link carries its p pushers' copies; this worker is on host 0).
    `by_layer`: the pieces of pieces()."""
    P, p = cl.pushers()
    W = P if contended else 1
    own = p if contended else 1
    beside = cl.servers_beside_workers

    def remote(k: int) -> int:
        """Copies of a piece at shard k's links: all W but those of its own host."""
        if not beside:
            return W
        return W - p if contended else (0 if k == 0 else 1)
    fwd = sum(l.forward_ms for l in layers) / 1e3 * scale
    S, L = cl.servers, cl.latency_s
    server_bw = _server_link_bw(cl)
    # when each link direction is free: the worker's (its host's) up and down, each shard's
    # in and out. E11: shard 0 beside this worker shares its host's NIC: one link each way.
    def link(name):
        if beside:
            return {("in", 0): "down", ("out", 0): "up"}.get(name, name)
        if cl.server_hosts > 0 and isinstance(name, tuple):   # the host's NIC, shared
            return name[0], "host", _server_host(cl, name[1])
        return name

    s_cpu = [fwd] * S
    t = fwd
    # pull request: before backward (bsp on CPU: PsWorker's early_pull_) or once backward
    # ended (ssp/asp always, OnGradientsReady after the last push)
    bwd_total = sum(l.backward_ms for l in layers) / 1e3 * scale
    early = cl.early_pull and cl.mode == "bsp"
    request = fwd + (0.0 if early else bwd_total) + L + cl.message_s
    # E2b: each link's token bucket (tbf): full at the start of the iteration (the link
    # idled at least burst/bandwidth since its last use), refilled at its rate while idle
    # (_share keeps it: tokens and when the link last went idle)
    buckets: dict = {}

    # E11: one push per host: the host's sum needs every member's gradient, so its pushes
    # start when backward ends, each piece after the leader summed the m members' values
    grouped = cl.host_aggregation and cl.mode == "bsp" and cl.workers_per_host > 1
    summing = (min(cl.workers_per_host, cl.workers) - 1) * cl.host_sum_byte_s if grouped else 0.0
    applied = []            # (ready time at server, shard, reply bytes, float32 bytes)
    position = []           # E12: the forward position of each of them
    used: dict = {}         # E12: each link's busy intervals while the pushes go
    replica = [0.0] * len(layers)   # E13: the worker's rebuild and step before layer l's forward
    # E2: each piece, in backward order, is handed over once its layer's backward ended
    order = []
    for layer_index, layer in reversed(list(enumerate(layers))):
        t += layer.backward_ms / 1e3 * scale
        order += [(layer_index, layer, piece, fwd + bwd_total if grouped else t)
                  for piece in by_layer[layer.name]]

    def staging(piece) -> float:
        return (piece.staged * cl.worker_wall_byte_s() + piece.push * cl.link_kernel_byte_s
                + 4.0 * piece.values * summing) * slow
    # E2, E2e: the worker's uplink, its connection to each shard sending in order, the
    # connections sharing the link; then each shard's inlink carrying W copies (cut-through),
    # the connections to the shards of one server host sharing its NIC
    ups = _share([(ready, piece.shard, 0.0 if beside and piece.shard == 0 else
                   own * piece.push, staging(piece)) for _, _, piece, ready in order],
                 cl.worker_link_bw(), buckets, link("up"), cl.burst_bytes, cl.message_s,
                 cl.pipelined_nic)
    used.setdefault(link("up"), []).extend(ups)
    used["pushes"] = list(used.get(link("up"), []))   # E11': every host's, as host 0's
    inlinks = [link(("in", piece.shard)) for _, _, piece, _ in order]
    ins = _share_links([(start + L, piece.shard, remote(piece.shard) * piece.push, 0.0)
                        for (_, _, piece, _), (start, _) in zip(order, ups)], inlinks,
                       server_bw, buckets, cl.burst_bytes)
    for name, span in zip(inlinks, ins):
        used.setdefault(name, []).append(span)
    rights_in = _rights_ahead(order, ups, ins, used, buckets, link, remote, own, cl)
    for (layer_index, layer, piece, _), (_, sent), (_, in_end) in zip(order, ups, ins):
        k = piece.shard
        local = beside and k == 0   # to the shard beside: through memory, not the NIC
        arrived = max(in_end, sent + (0.0 if local else L))
        if piece.forward_wait > 0:
            # E13 holder: the R's this shard lacks come from the forwarder once it has every
            # pusher's R, one hop more
            arrived = max(arrived, rights_in.get(layer.name, sent + 2 * L) + L)
        # E3: the server applies once all W copies are in (bsp: sum + one step), after
        # rebuilding factored chunks (E1b).
        begin = max(arrived, s_cpu[k])
        s_cpu[k] = begin + W * (4.0 * piece.values * _server_wall_byte_s(cl)
                                + piece.flops * cl.server_flop_s / max(1, cl.server_threads)
                                + cl.message_s) * slow
        applied.append((s_cpu[k], k, piece.pull - piece.early_reply, 4.0 * piece.values
                        if piece.pull_staged is None else piece.pull_staged))
        position.append(layer_index)
        replica[layer_index] += (piece.worker_flops * cl.worker_flop_s
                                 + piece.replica_bytes * cl.worker_apply_byte_s) * scale
    if cl.pull_overlap:
        return _overlapped_pull(layers, applied, position, replica, t, fwd, request, used,
                                link, buckets, remote, own, scale, slow, cl)
    end = t
    if cl.mode != "bsp" and not cl.streamed_pulls:
        # E4' (runs 1-11, before pulls beside pushes): ssp/asp: ShardState answered a pull
        # whole (PullReply with every chunk of the shard, one message) once its single
        # thread reached the request, which came after this worker's pushes on the same
        # connection: after their apply. E4'' (streamed_pulls): the pull waits chunk by
        # chunk for this worker's push (after_push) and each piece leaves once applied.
        merged = {}
        for ready, k, nbytes, dense in applied:
            r, n, d = merged.get(k, (0.0, 0.0, 0.0))
            merged[k] = (max(r, ready), n + nbytes, d + dense)
        applied = [(r, k, n, d) for k, (r, n, d) in sorted(merged.items(),
                                                           key=lambda kv: kv[1][0])]
    # E11: the replies take a link where the pushes (first) leave it free: with a shard
    # beside, host 0's uplink carries its pushes and shard 0's replies, its downlink the
    # other hosts' pushes to shard 0 and the replies to this worker; every host's uplink
    # is busy with its worker's pushes as host 0's is (hosts alike). (Apart, the pushes
    # leave the outlinks and the downlink idle: there this is the plain sequence.)
    # E4, E2e: a piece's reply leaves its shard's outlink (W copies) once applied and
    # requested, then takes the worker's downlink (cut-through); the connections of a server
    # host's shards share its NIC, those to one worker its downlink
    outs = _share_links([(max(ready, request), k, remote(k) * nbytes, 0.0)
                         for ready, k, nbytes, _ in applied],
                        [link(("out", k)) for _, k, _, _ in applied], server_bw, buckets,
                        cl.burst_bytes, cl.message_s, held=lambda name: _held(used, name, beside))
    remote_replies = [i for i, (_, k, _, _) in enumerate(applied) if not (beside and k == 0)]
    downs = dict(zip(remote_replies, _share(
        [(outs[i][0] + L, applied[i][1], own * applied[i][2],
          _reply_staging(*applied[i][2:], cl, slow)) for i in remote_replies],
        cl.worker_link_bw(), buckets, link("down"), cl.burst_bytes, pipelined=cl.pipelined_nic,
        blocked=used.get("down", []))))
    for i, reply in enumerate(applied):
        if i in downs:
            arrive = max(outs[i][1] + L, downs[i][1])
        else:   # the shard beside hands the reply over in memory, not after its NIC
            arrive = outs[i][0] + _reply_staging(*reply[2:], cl, slow)
        end = max(end, arrive + cl.message_s)
    # E13: the worker rebuilds the broadcast weights before the next forward reads them
    return end + sum(replica)


def _held(used: dict, name, beside: bool) -> list:
    """E11': the intervals other traffic holds an outlink: what went on it before, and with
    a shard on every host (where shard k's outlink is host k's uplink) that host's pushes,
    taken to be this worker's host's (hosts alike)."""
    return used.get(name, []) + (used.get("pushes", []) if beside and name != "up" else [])


def _rights_ahead(order: list, ups: list, ins: list, used: dict, buckets: dict, link, remote,
                  own: int, cl: Cluster) -> dict:
    """E13 holder: a holder shard relays each R it receives to every worker ahead of the step
    (Piece.early_reply: its host's outlink, W copies, then each worker's downlink, where the
    pushes to a shard beside leave it free); the intervals join `used`, so the replies after
    the step take the gaps. Returns, per layer, when a worker (the forwarder) has every
    pusher's R."""
    early = [i for i, (_, _, piece, _) in enumerate(order) if piece.early_reply > 0]
    beside = cl.servers_beside_workers
    outlinks = [link(("out", order[i][2].shard)) for i in early]
    spans = _share_links([(max(ins[i][1], ups[i][1] + cl.latency_s), order[i][2].shard,
                           remote(order[i][2].shard) * order[i][2].early_reply, 0.0)
                          for i in early], outlinks, _server_link_bw(cl), buckets,
                         cl.burst_bytes, held=lambda name: _held(used, name, beside))
    out_spans = dict(zip(early, spans))
    for name, span in zip(outlinks, spans):
        used.setdefault(name, []).append(span)
    far = [i for i in early if not (beside and order[i][2].shard == 0)]
    down_spans = dict(zip(far, _share(
        [(out_spans[i][0] + cl.latency_s, order[i][2].shard, own * order[i][2].early_reply,
          0.0) for i in far], cl.worker_link_bw(), buckets, link("down"), cl.burst_bytes,
        blocked=used.get("down", []))))
    used.setdefault("down", []).extend(down_spans.values())
    rights: dict = {}
    for i in early:
        name = order[i][1].name
        got = (max(out_spans[i][1] + cl.latency_s, down_spans[i][1]) if i in down_spans
               else out_spans[i][0])
        rights[name] = max(rights.get(name, 0.0), got)
    return rights


def _reply_staging(nbytes: float, dense: float, cl: Cluster, slow: float) -> float:
    """E4: the worker's CPU for a reply of `nbytes` on the wire and `dense` float32 bytes:
    its client's copy per float32 byte and its stack per byte on the wire, at its share of
    the cores."""
    return (dense * cl.worker_wall_byte_s() + nbytes * cl.link_kernel_byte_s) * slow


def _overlapped_pull(layers, applied, position, replica, backward_end: float, fwd: float,
                     request: float, used: dict, link, buckets: dict, remote, own: int,
                     scale: float, slow: float, cl: Cluster) -> float:
    """E12: the pull replies overlap the next forward, in forward order. Each shard sends its
    replies once applied and requested, of those ready the one earliest in forward order; a
    connection lets pull_window_bytes wait ahead of the wire, so the choice is made that long
    before the previous reply is through (the window drains at the connection's share of
    the worker's downlink, shared by the shards that send to it, or of the shard's outlink,
    shared by the workers it sends to). A reply is cut into parts of at most a chunk (the
    shard cuts it at its chunks), so a part of an earlier layer can overtake the rest of a
    large late one. The parts take their shard's (host's) outlink and then the worker's
    downlink as E2e's stations, where the pushes (E2, first) leave them free: the weights of
    the late layers, applied first, travel while the early layers' pushes still go. The next
    forward starts when backward ended; layer l's forward at max(end of forward l-1, arrival
    of the replies layer l reads), after E13's rebuild. Returns the iteration time: from
    the end of one forward to the next's."""
    L, S = cl.latency_s, cl.servers
    beside = cl.servers_beside_workers
    server_bw = _server_link_bw(cl)
    senders = S - (1 if beside else 0)
    fanout = max([remote(k) for k in range(S)] + [1])
    drain = min(cl.worker_link_bw() / max(1, senders), server_bw / fanout)
    ahead = cl.pull_window_bytes / drain
    parts = []   # (ready and requested, forward position, shard, bytes, float32 bytes)
    for (ready, k, nbytes, dense), pos in zip(applied, position):
        n = max(1, math.ceil(dense / cl.chunk_bytes))
        parts += [(max(ready, request), pos, k, nbytes / n, dense / n)] * n
    outs = _share_links([(ready, k, remote(k) * nbytes, 0.0) for ready, _, k, nbytes, _ in parts],
                        [link(("out", p[2])) for p in parts], server_bw, buckets,
                        cl.burst_bytes, cl.message_s, held=lambda name: _held(used, name, beside),
                        priority=[(pos, ready) for ready, pos, _, _, _ in parts], ahead=ahead)
    # the downlink: each shard's parts in the order it sent them, the shards sharing it
    far = sorted((i for i, p in enumerate(parts) if not (beside and p[2] == 0)),
                 key=lambda i: outs[i][0])
    staging = [_reply_staging(p[3], p[4], cl, slow) for p in parts]
    downs = dict(zip(far, _share([(outs[i][0] + L, parts[i][2], own * parts[i][3], staging[i])
                                  for i in far], cl.worker_link_bw(), buckets, link("down"),
                                 cl.burst_bytes, pipelined=cl.pipelined_nic,
                                 blocked=used.get("down", []))))
    arrival = [0.0] * len(layers)
    for i, p in enumerate(parts):
        # the shard beside hands the reply over in memory, not after its NIC
        arrive = (max(outs[i][1] + L, downs[i][1]) if i in downs else outs[i][0] + staging[i])
        arrival[p[1]] = max(arrival[p[1]], arrive + cl.message_s)
    done = backward_end
    for i, layer in enumerate(layers):
        done = max(done, arrival[i]) + replica[i] + layer.forward_ms / 1e3 * scale
    return done - fwd
