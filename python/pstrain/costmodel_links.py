"""The cost model's link stations (costmodel_iteration.py, docs/scaling.md E2e): one
direction of a link carrying messages from several TCP connections, each sending in order,
the connections with bytes in flight sharing its rate equally, with a token bucket (E2b),
the messages' CPU beside or after the wire (E2c, E2d), intervals other traffic holds (E11',
E12) and E12's priorities; and the plain busy-interval fill the replies of E11' use."""
from __future__ import annotations

import math


def _share_links(jobs: list, links: list, bw: float, buckets: dict, burst: float,
                 gap: float = 0.0, held=None, priority: list | None = None,
                 ahead: float = 0.0) -> list:
    """E2e on several links at once: job i goes on link links[i], each link's jobs (in
    their order) one _share, blocked where held(link) says other traffic holds it.
    Returns (start, end) a job."""
    spans: list = [None] * len(jobs)
    for name in dict.fromkeys(links):   # first seen first: the order is the model's
        mine = [i for i, n in enumerate(links) if n == name]
        for i, span in zip(mine, _share(
                [jobs[i] for i in mine], bw, buckets, name, burst, gap,
                blocked=held(name) if held else (),
                priority=None if priority is None else [priority[i] for i in mine],
                ahead=ahead)):
            spans[i] = span
    return spans


def _share(jobs: list, bw: float, buckets: dict, name, burst: float, gap: float = 0.0,
           pipelined: bool = False, blocked: list = (), priority: list | None = None,
           ahead: float = 0.0) -> list:
    """E2e: messages on one direction of a link from several TCP connections (one a shard).
    jobs: (earliest start, connection, bytes, CPU seconds). A connection sends its messages
    in order, each `gap` after the previous one ended and no earlier than its earliest
    start; the connections with bytes in flight share the link equally (processor sharing:
    TCP's fair share), in the gaps `blocked` leaves (intervals other traffic holds it: the
    pushes, E11/E12). The link's token bucket (E2b, `buckets[name]`: tokens and when the link
    last went idle) lets up to `burst` bytes pass at once after it idled, refilled at bw while
    idle. The messages' CPU (the worker's staging, E2d's wall time on its I/O threads) runs
    one message at a time, in the order the messages start (`pipelined`, E2c: beside the
    wire; a message ends when both are done) or their last bytes arrive (else: after the
    wire). One connection alone is E2's FIFO. With `priority` (E12: a reply's
    forward position) a connection sends next, of its jobs ready `ahead` seconds before it is
    free (what waits in its window was chosen then), the one of lowest priority, else the one
    ready first. Returns (start, end) a job."""
    spans: list = [None] * len(jobs)
    unsent: dict = {}                     # connection -> its jobs not started, in order
    for i, (_, conn, _, _) in enumerate(jobs):
        unsent.setdefault(conn, []).append(i)
    waiting: dict = {}                    # connection -> (start of its next job, the job)

    def choose(c, free: float) -> None:
        """The job connection c sends once it is free at `free`."""
        left = unsent[c]
        if not left:
            return
        i = left[0]
        if priority is not None:
            ready = [j for j in left if jobs[j][0] <= free - ahead]
            i = (min(ready, key=lambda j: priority[j]) if ready else
                 min(left, key=lambda j: (jobs[j][0], priority[j])))
        left.remove(i)
        waiting[c] = (max(jobs[i][0], free) + gap, i)
    for c in unsent:
        choose(c, -math.inf)
    sending: dict = {}                    # connection -> [job, bytes left]
    tokens, idle = buckets.get(name, (burst, None))
    blocked = sorted(blocked)
    t = min((w[0] for w in waiting.values()), default=0.0)
    cpu_free = [-math.inf]                # when the CPU is done with the messages so far
    cpu_end: dict = {}                    # pipelined: when a message's CPU is done

    def run_cpu(i: int, ready: float) -> float:
        if jobs[i][3] <= 0.0:
            return ready
        cpu_free[0] = max(ready, cpu_free[0]) + jobs[i][3]
        return cpu_free[0]

    def finish(c, i: int, wire_end: float) -> None:
        start = spans[i][0]
        end = max(wire_end, cpu_end.pop(i)) if pipelined else run_cpu(i, wire_end)
        spans[i] = (start, end)
        choose(c, end)

    while waiting or sending:
        for c, (at, i) in sorted(waiting.items(), key=lambda kv: kv[1][0]):
            if at > t:
                continue
            del waiting[c]
            if not sending:               # the link idled since `idle`: tokens refilled
                tokens = burst if idle is None else \
                    min(burst, tokens + max(0.0, t - idle) * bw)
            spans[i] = (t, t)
            if pipelined:
                cpu_end[i] = run_cpu(i, t)
            take = min(max(tokens, 0.0), jobs[i][2])
            left = jobs[i][2] - take
            tokens -= take
            if left <= 0.0:               # through on tokens alone: the link idles on
                if not sending:
                    idle = t
                finish(c, i, t)
            else:
                sending[c] = [i, left]
        events = [w[0] for w in waiting.values()]
        held = next((end for begin, end in blocked if begin <= t < end), None)
        done_at, least = math.inf, 0.0
        if sending and held is not None:  # other traffic holds the link until then
            events.append(held)
        elif sending:
            least = min(left for _, left in sending.values())
            done_at = t + least * len(sending) / bw
            events += [done_at] + [begin for begin, _ in blocked if begin > t]
        if not events:
            break
        later = min(events)
        if sending and held is None:
            # every connection in flight moved the same bytes; exactly `least` at done_at
            moved = least if later >= done_at else (later - t) * bw / len(sending)
            for c in list(sending):
                sending[c][1] -= moved
                if sending[c][1] <= 1e-9 * max(1.0, jobs[sending[c][0]][2]):
                    finish(c, sending.pop(c)[0], later)
            if not sending:
                idle = later
        t = later
    buckets[name] = (tokens, idle)
    return spans


def _fill(busy: list, start: float, duration: float) -> float:
    """E12: when a transfer of `duration` that starts at `start` ends on a link that is
    busy in the intervals `busy` (the pushes, which go first): it takes the gaps."""
    t, left = start, duration
    for a, b in sorted(busy):
        if b <= t:
            continue
        if a > t:
            if left <= a - t:
                return t + left
            left -= a - t
        t = max(t, b)
    return t + left
