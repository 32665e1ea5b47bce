"""The cost model's link stations (python/pstrain/costmodel_links.py, docs/scaling.md E2e,
E11'): a link direction shared by connections, each sending in order, and the busy-interval
fill, against hand-computed times."""
from __future__ import annotations

import pytest

from pstrain import costmodel_links


def test_e11_replies_take_the_gaps_the_pushes_leave_on_a_link():
    # a link busy 10-20 and 30-40 ms: 10 ms from 5 run 5-10 and 20-25; 15 ms from 12 run
    # 20-30 and 40-45; after the last interval, at once
    busy = [(0.030, 0.040), (0.010, 0.020)]
    assert costmodel_links._fill(busy, 0.005, 0.010) == pytest.approx(0.025)
    assert costmodel_links._fill(busy, 0.012, 0.015) == pytest.approx(0.045)
    assert costmodel_links._fill(busy, 0.050, 0.010) == pytest.approx(0.060)
    assert costmodel_links._fill([], 0.050, 0.010) == 0.050 + 0.010


def test_e2e_connections_share_a_link_each_in_order():
    """E2e by hand, a 100 MB/s link (100 bytes a microsecond), times in ms."""
    def share(*args, **kwargs) -> list:
        return [t for span in costmodel_links._share(*args, **kwargs) for t in span]
    # one connection: E2's FIFO, each message `gap` after the one before ended
    assert share([(0.0, 0, 1e6, 0.0), (0.0, 0, 1e6, 0.0)], 1e8, {}, "l", 0.0, gap=0.001) == \
        pytest.approx([0.001, 0.011, 0.012, 0.022])
    # two connections at once share the rate: of 1 MB and 2 MB from 0, the first ends at
    # 20 ms; a third message (connection 0, ready at 5) waited for it and shares the link
    # with the second's last 1 MB: both end at 40
    got = share([(0.0, 0, 1e6, 0.0), (0.0, 1, 2e6, 0.0), (0.005, 0, 1e6, 0.0)], 1e8, {}, "l",
                0.0)
    assert got == pytest.approx([0.0, 0.020, 0.0, 0.040, 0.020, 0.040])
    # CPU after the bytes (in series), or beside them (a NIC's DMA, E2c): 4 ms of CPU
    assert share([(0.0, 0, 1e6, 0.004)], 1e8, {}, "l", 0.0)[1] == pytest.approx(0.014)
    assert share([(0.0, 0, 1e6, 0.004)], 1e8, {}, "l", 0.0, pipelined=True)[1] == \
        pytest.approx(0.010)
    # other traffic holds the link 5-15 ms: 1 MB from 0 runs 0-5 and 15-20
    assert share([(0.0, 0, 1e6, 0.0)], 1e8, {}, "l", 0.0, blocked=[(0.005, 0.015)]) == \
        pytest.approx([0.0, 0.020])
    # a token bucket of 0.5 MB, full at first: half the message passes at once; the
    # bucket refills at the rate while the link idles (5-7.5 ms: 0.25 MB) and not while
    # it sends
    buckets: dict = {}
    assert share([(0.0, 0, 1e6, 0.0)], 1e8, buckets, "l", 5e5)[1] == pytest.approx(0.005)
    assert share([(0.0075, 0, 1e6, 0.0)], 1e8, buckets, "l", 5e5)[1] == \
        pytest.approx(0.0075 + 0.0075)
    assert list(buckets["l"]) == pytest.approx([0.0, 0.015], abs=1e-9)
    # what passed on tokens alone is spent: of two 0.3 MB messages at once on a full 0.5 MB
    # bucket, the first passes at once, the second has 0.2 MB of tokens left (1 ms more)
    assert share([(0.0, 0, 3e5, 0.0), (0.0, 1, 3e5, 0.0)], 1e8, {}, "l", 5e5) == \
        pytest.approx([0.0, 0.0, 0.0, 0.001])
    # a message of no bytes ends at its start (plus its CPU); nothing to send, nothing back
    assert share([(0.003, 2, 0.0, 0.001)], 1e8, {}, "l", 0.0) == pytest.approx([0.003, 0.004])
    assert share([], 1e8, {}, "l", 0.0) == []
    # the messages' CPU is one thread's, one message at a time: two connections' 1 MB share
    # the wire until 20 ms, then their 4 ms of CPU run one after the other (in series), or
    # from their starts, beside the wire (E2c)
    two = [(0.0, 0, 1e6, 0.004), (0.0, 1, 1e6, 0.004)]
    assert share(two, 1e8, {}, "l", 0.0) == pytest.approx([0.0, 0.024, 0.0, 0.028])
    assert share(two, 1e8, {}, "l", 0.0, pipelined=True) == \
        pytest.approx([0.0, 0.020, 0.0, 0.020])
    # the bucket's count never goes below zero by rounding: a message of no bytes after a
    # partial spend passes at once, even inside an interval other traffic holds
    assert share([(0.0, 0, 1e6, 0.0), (0.001, 1, 0.0, 0.0)], 1e8, {}, "l", 0.3,
                 blocked=[(0.001, 0.005)])[2:] == pytest.approx([0.001, 0.001])
    # E12: priorities on one connection. Free at 0: a (ready 0, priority 5) goes; at its end
    # (10 ms) b (ready 2, priority 9) and c (ready 8, priority 1) are ready: c first. With 5
    # ms of window, what was ready at 5 ms when the connection frees at 10 is b alone
    jobs = [(0.0, 0, 1e6, 0.0), (0.002, 0, 1e6, 0.0), (0.008, 0, 1e6, 0.0)]
    assert share(jobs, 1e8, {}, "l", 0.0, priority=[5, 9, 1]) == \
        pytest.approx([0.0, 0.010, 0.020, 0.030, 0.010, 0.020])
    assert share(jobs, 1e8, {}, "l", 0.0, priority=[5, 9, 1], ahead=0.005) == \
        pytest.approx([0.0, 0.010, 0.010, 0.020, 0.020, 0.030])
