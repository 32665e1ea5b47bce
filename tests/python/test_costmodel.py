"""The cost model (python/pstrain/costmodel.py) against hand-computed cases; its inputs'
errors. docs/scaling.md derives the equations these numbers follow."""
from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from pstrain import caffe_schema, costmodel, costmodel_iteration, costmodel_links
from pstrain.costmodel import Cluster, CostModelError, LayerTime, Param, place, predict

ROOT = pathlib.Path(__file__).resolve().parents[2]
MB4 = 1_000_000  # values: 4 MB of float32

# One layer, forward 10 ms, backward 20 ms, one 4 MB parameter in one chunk; 100 MB/s links
# (40 ms for the parameter), 1 ms latency, no per-message or server CPU cost.
ONE = [LayerTime("fc", 10.0, 20.0)]
ONE_P = [Param("fc", "fc/weight", MB4)]
LINK = dict(worker_bw=1e8, server_bw=1e8, latency_s=1e-3, message_s=0.0, server_byte_s=0.0,
            chunk_bytes=1 << 30)


def test_one_worker_one_server_is_compute_plus_both_transfers_plus_two_latencies():
    r = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, **LINK))
    # 30 ms compute + push 40 ms + pull 40 ms + 1 ms each way
    assert r.iteration_s == pytest.approx(0.030 + 2 * 0.040 + 2 * 0.001)
    assert r.images_per_s == pytest.approx(64 / 0.112)
    assert r.compute_s == pytest.approx(0.030)


def test_sixteen_bit_pulls_halve_the_reply_and_pushes_the_request():
    """E1: transport.pull_compression fp16/bf16 makes a pull 2 bytes a value; pushes
    follow transport.compression (docs/config-reference.md, "16-bit on the wire")."""
    assert [costmodel.value_bytes(m) for m in ("none", "fp16", "bf16", "sign")] == \
        [4.0, 2.0, 2.0, 0.125]
    assert costmodel.value_bytes("topk", 0.01) == pytest.approx(0.08)
    with pytest.raises(CostModelError, match="compression must be one of none, fp16, bf16, "
                                             "topk, sign, got 'int8'"):
        costmodel.value_bytes("int8")
    pulls = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, pull_value_bytes=2.0, **LINK))
    # 30 ms compute + push 40 ms + pull 20 ms (2 MB) + 1 ms each way
    assert pulls.iteration_s == pytest.approx(0.030 + 0.040 + 0.020 + 2 * 0.001)
    both = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, push_value_bytes=2.0,
                                          pull_value_bytes=2.0, **LINK))
    # bsp, 4 workers: the server NIC takes 4 x 20 ms in, then sends 4 x 20 ms out
    assert both.iteration_s == pytest.approx(0.030 + 2 * 4 * 0.020 + 2 * 0.001)
    assert both.busy_s["server link"] == pytest.approx(0.080)
    # pulls alone: the inlink still carries 4 x 40 ms, the outlink 4 x 20 ms
    half = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, pull_value_bytes=2.0, **LINK))
    assert half.iteration_s == pytest.approx(0.030 + 4 * 0.040 + 4 * 0.020 + 2 * 0.001)
    assert half.busy_s["server link"] == pytest.approx(0.160)


def test_bsp_server_link_carries_every_workers_copy():
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, **LINK))
    # the server NIC takes 4 x 40 ms in, then sends 4 x 40 ms out
    assert r.iteration_s == pytest.approx(0.030 + 2 * 4 * 0.040 + 2 * 0.001)
    assert r.bottleneck == "server link"
    assert r.busy_s["server link"] == pytest.approx(0.160)
    assert r.images_per_s == pytest.approx(4 * 64 / 0.352)


def test_e15_a_bsp_exchange_gets_its_share_of_every_links_rate():
    """E15: in bsp over more than one host with a shard on every host every link runs at
    exchange_efficiency of its rate (bench/exchange_probe.py). E11's two hosts at 0.8
    (80 MB/s): out 30..80 (pushes to shard 1), in 31..81; replies 81..131 out, 82..132 in.
    Shards apart or one shard beside (a star, not the probe's all-to-all), one worker, one
    host, or asp: as they were."""
    params = [Param("fc", "fc/weight", MB4 // 2), Param("fc", "fc/bias", MB4 // 2)]
    beside = dict(LINK, workers_per_host=2, servers_beside_workers=True)
    r = predict(ONE, params, 64, Cluster(workers=4, servers=2, exchange_efficiency=0.8,
                                         **beside))
    assert r.iteration_s == pytest.approx(0.132)
    assert r.busy_s["worker link"] == pytest.approx(0.100)
    for kw in (dict(LINK, workers=4, servers=1), dict(LINK, workers=1, servers=1),
               dict(beside, workers=4, servers=2, mode="asp"),
               dict(beside, workers=4, servers=1),    # one shard beside, on host 0 only
               dict(beside, workers=2, servers=1)):   # one host: no exchange between hosts
        assert predict(ONE, params, 64, Cluster(exchange_efficiency=0.8, **kw)) == \
            predict(ONE, params, 64, Cluster(**kw))
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(CostModelError, match=r"exchange_efficiency must be in \(0, 1\], "
                                                 f"got {bad}"):
            predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, exchange_efficiency=bad,
                                            **LINK))
    flags = ["--time", str(ROOT / "bench/data/h200_alexnet_time.json"), "--net",
             str(ROOT / "configs/nets/alexnet_deploy.prototxt"), "--batch", "128"]
    for extra, expected in (([], 1.0), (["--exchange-efficiency", "0.8"], 0.8)):
        args = costmodel._parser().parse_args(flags + extra)
        assert costmodel.cluster_from_args(args, 8, 8).exchange_efficiency == expected


def test_two_servers_split_the_server_link_load():
    params = [Param("fc", "fc/weight", MB4 // 2), Param("fc", "fc/bias", MB4 // 2)]
    r = predict(ONE, params, 64, Cluster(workers=4, servers=2, **LINK))
    # E2e: the worker's connections to the two shards share its uplink: both 2 MB go
    # 30..70 ms at half its rate; server 0 in 31..111 and server 1 in 31..111 (4 copies
    # each on its own NIC); replies: each server out 111..191, the two share the worker's
    # downlink 112..152: both arrive at 192
    assert r.iteration_s == pytest.approx(0.192)


def test_asp_queues_workers_at_the_server_link():
    # pulls answered whole behind the pushes (E4'); streamed pulls: the E7b test below
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp", streamed_pulls=False,
                                        **LINK))
    # One worker alone: 112 ms, of which 40 ms on the server's inlink and 40 ms on its
    # outlink; the rest (32 ms) is a delay. Mean value analysis, by hand:
    #   n=1: R = 40+40 ms, X = 1/0.112, queue 0.35714 at each link
    #   n=2: R = 2 x 40 x 1.35714 = 108.571 ms, X = 2/0.140571 = 14.2276, queue 0.77236
    #   n=3: R = 2 x 40 x 1.77236 = 141.789 ms, X = 3/0.173789 = 17.2623, queue 1.22381
    #   n=4: R = 2 x 40 x 2.22381 = 177.905 ms, X = 4/0.209905: 209.905 ms an iteration
    assert r.iteration_s == pytest.approx(0.209905, rel=1e-5)
    assert r.iteration_s > max(0.112, r.busy_s["server link"])  # above both bounds
    assert r.bottleneck == "server link"
    alone = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, mode="asp", **LINK))
    assert alone.iteration_s == pytest.approx(0.112)  # as bsp with one worker


def test_push_of_a_late_layer_hides_behind_backward_of_earlier_layers():
    layers = [LayerTime("conv", 5.0, 50.0), LayerTime("fc", 5.0, 5.0)]
    params = [Param("conv", "conv/weight", 1000), Param("fc", "fc/weight", MB4)]
    late = predict(layers, params, 1, Cluster(workers=1, servers=1, **LINK))
    # backward: fc ready at 15 ms, pushed 15..55 ms (in at the server by 56), conv's backward
    # ends at 65 ms; the pull request reaches the server at 66 ms: fc's 40 ms reply arrives
    # at 107 ms, conv's 4 KB after it (+0.04 ms)
    assert late.iteration_s == pytest.approx(0.107 + 4000 / 1e8)
    early = predict(layers, params, 1, Cluster(workers=1, servers=1, early_pull=True, **LINK))
    # the request went out before backward: fc's reply leaves at 56 ms, arrives at 97 ms;
    # conv's (pushed 65..65.04 ms) queues behind it on the worker's downlink
    assert early.iteration_s == pytest.approx(0.097 + 4000 / 1e8)


def test_cpu_contention_scales_compute_by_busy_processes_over_cores():
    tiny = [Param("fc", "fc/weight", 1)]
    r = predict(ONE, tiny, 8, Cluster(workers=4, servers=1, cores=2, **dict(LINK, latency_s=0)))
    assert r.compute_s == pytest.approx(2 * 0.030)
    assert r.iteration_s == pytest.approx(0.060, rel=1e-3)
    alone = predict(ONE, tiny, 8, Cluster(workers=1, servers=1, cores=2, **LINK))
    assert alone.compute_s == pytest.approx(0.030)


def test_placement_follows_key_placement():
    # 4 values a chunk: p0 -> ids 0 (4), 1 (4), 2 (2); p1 -> 3 (3); p2 -> 4 (4), 5 (3).
    # Largest first to the lightest shard: 0->s0, 1->s1, 4->s0, 3->s1, 5->s1, 2->s0.
    chunks = place([10, 3, 7], 2, 16)
    assert [(c.param, c.values, c.shard) for c in chunks] == [
        (0, 4, 0), (0, 4, 1), (0, 2, 0), (1, 3, 1), (2, 4, 0), (2, 3, 1)]


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_net_params_count_the_published_parameter_totals():
    lenet = costmodel.net_params(ROOT / "configs/nets/lenet_deploy.prototxt")
    assert sum(p.values for p in lenet) == 431080
    alexnet = costmodel.net_params(ROOT / "configs/nets/alexnet_deploy.prototxt")
    assert sum(p.values for p in alexnet) == 60965224  # 61.0 M (Krizhevsky et al.)
    assert {p.name: p.values for p in alexnet}["fc6/weight"] == 4096 * 256 * 6 * 6


def test_missing_time_file_names_the_file(tmp_path):
    with pytest.raises(CostModelError, match=r"nope\.json: cannot read"):
        costmodel.load_layer_times(tmp_path / "nope.json")


def test_malformed_line_names_file_and_line(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('{"event":"layer_time","layer":"a","forward_ms":1,"backward_ms":2}\n{"event":\n')
    with pytest.raises(CostModelError, match=r"t\.json:2: not a JSON line"):
        costmodel.load_layer_times(f)
    f.write_text('{"event":"layer_time","layer":"a","forward_ms":"x","backward_ms":2}\n')
    with pytest.raises(CostModelError, match=r"t\.json:1: a layer_time event needs"):
        costmodel.load_layer_times(f)


def test_layer_times_are_scaled_to_the_median_iteration(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('{"event":"layer_time","layer":"a","forward_ms":1,"backward_ms":3}\n'
                 '{"event":"layer_time","layer":"b","forward_ms":2,"backward_ms":4}\n'
                 '{"event":"time","total_ms":10,"median_total_ms":5}\n')
    a, b = costmodel.load_layer_times(f)  # means sum to 10 ms, the median is 5 ms
    assert (a.forward_ms, a.backward_ms, b.forward_ms, b.backward_ms) == (0.5, 1.5, 1.0, 2.0)


def test_time_file_of_another_net_is_refused():
    with pytest.raises(CostModelError, match='layer "fc" has parameters but no layer_time'):
        predict([LayerTime("conv", 1, 1)], ONE_P, 1, Cluster(workers=1, servers=1))


def test_cli_prints_one_error_and_exits_2(tmp_path, capsys):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"event": "time"}) + "\nnot json\n")
    code = costmodel.main(["--time", str(f), "--net", str(tmp_path / "n.prototxt"),
                           "--batch", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{f}:2: not a JSON line" in err[0]


def test_saturated_cores_add_the_workers_communication_work():
    layers = [LayerTime("conv", 5.0, 50.0), LayerTime("fc", 5.0, 5.0)]
    params = [Param("fc", "fc/weight", MB4)]
    fast = dict(LINK, worker_bw=1e12, server_bw=1e12, latency_s=0.0, worker_byte_s=1e-9)
    # The worker's copies: 2 x 4 MB x 1 ns = 8 ms a iteration. Its path alone ends with the
    # compute (65 ms: fc's push and reply are done long before conv's backward ends).
    two = predict(layers, params, 1, Cluster(workers=2, servers=1, cores=2, early_pull=True,
                                             **fast))
    assert two.iteration_s == pytest.approx(0.065 + 0.008, rel=1e-6)  # 2 busy / 2 cores
    one = predict(layers, params, 1, Cluster(workers=1, servers=1, cores=2, early_pull=True,
                                             **fast))
    # one worker on 2 cores: its communication work runs on the core its compute leaves
    assert one.iteration_s == pytest.approx(0.065, rel=1e-6)
    three = predict(layers, params, 1, Cluster(workers=3, servers=1, cores=2, early_pull=True,
                                               **fast))
    # 3 busy / 2 cores: compute x 1.5, the copies saturate-added: 1.5 x (65 + 8) ms
    assert three.iteration_s == pytest.approx(1.5 * 0.073, rel=1e-6)
    gpu = predict(layers, params, 1, Cluster(workers=2, servers=1, early_pull=True, **fast))
    assert gpu.iteration_s == pytest.approx(0.065, rel=1e-6)  # dedicated devices: overlapped


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_cli_predicts_from_the_h200_layer_times(capsys):
    code = costmodel.main(["--time", str(ROOT / "bench/data/h200_resnet50_time.json"),
                           "--net", str(ROOT / "configs/nets/resnet50_deploy.prototxt"),
                           "--batch", "32", "--workers", "1,8", "--servers", "4",
                           "--bandwidth-gbit", "100", "--message-us", "0", "--latency-us", "0",
                           "--json"])
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert code == 0 and [(l["workers"], l["servers"]) for l in lines] == [(1, 4), (8, 4)]
    # the file's median iteration (its layers sum to 71.69 ms of means)
    assert lines[0]["compute_ms"] == pytest.approx(71.66, abs=0.01)
    # one worker, NIC-bound: 102.2 MB each way at 12.5 GB/s (8.2 ms) partly hidden behind
    # backward; never faster than its compute
    assert 71.66 < lines[0]["iteration_ms"] < 71.66 + 2 * 8.2
    assert lines[1]["images_per_s"] > lines[0]["images_per_s"]


def test_asp_pulls_after_backward_and_whole_whatever_early_pull_says():
    layers = [LayerTime("conv", 5.0, 50.0), LayerTime("fc", 5.0, 5.0)]
    params = [Param("conv", "conv/weight", 1000), Param("fc", "fc/weight", MB4)]
    for mode in ("asp", "ssp"):
        r = predict(layers, params, 1, Cluster(workers=1, servers=1, mode=mode, early_pull=True,
                                               streamed_pulls=False, **LINK))
        # PsWorker sends an asp/ssp pull after the last push (OnGradientsReady): it reaches
        # the server at 66 ms, after conv's push (in and applied at 66.04 ms); ShardState
        # answers it whole: 4.004 MB leave 66.04..106.08 ms and arrive at 107.08 ms. (bsp
        # with the early pull: 97.04 ms, test above.)
        assert r.iteration_s == pytest.approx(0.10708, rel=1e-9)
        # Pulls beside the pushes (E4''): the same request at 66 ms is answered chunk by
        # chunk: fc's reply (applied at 56 ms) leaves 66..106 ms and arrives at 107 ms, then
        # conv's 4 KB (applied at 66.04 ms) leave 106..106.04 and arrive at 107.04 ms.
        r = predict(layers, params, 1, Cluster(workers=1, servers=1, mode=mode, early_pull=True,
                                               **LINK))
        assert r.iteration_s == pytest.approx(0.10704, rel=1e-9)


def test_server_cpu_runs_at_its_share_of_the_cores():
    # 4 MB x 0.25 ns = 1 ms of server CPU a worker; 100 other busy programs on 2 cores, the
    # layer times taken beside the same 100: compute stays 30 ms (x 1.00003). The server
    # shares the cores with them, itself (u_s = 1 ms / T) and the worker while it computes
    # (30 ms / T): at T = 162.1 ms, sigma = (0.1851 + 0.0062 + 100) / 2 = 50.096, so its
    # 1 ms takes 50.1 ms. Path: 30 + push 40 + 1 + apply 50.1 + pull 40 + 1 = 162.1 ms.
    cl = Cluster(workers=1, servers=1, cores=2, background=100, timed_background=100,
                 **dict(LINK, server_byte_s=0.25e-9))
    r = predict(ONE, ONE_P, 1, cl)
    assert r.iteration_s == pytest.approx(0.1621, rel=1e-3)
    assert r.compute_s == pytest.approx(0.030, rel=1e-3)
    quiet = predict(ONE, ONE_P, 1, Cluster(workers=1, servers=1, cores=2,
                                           **dict(LINK, server_byte_s=0.25e-9)))
    assert quiet.iteration_s == pytest.approx(0.030 + 0.080 + 0.002 + 0.001, rel=1e-6)


def test_server_stack_cpu_bounds_bsp_and_queues_asp():
    # 10 ns of the server's stack a byte: 40 ms of server CPU per worker and iteration,
    # beside links so fast (1 TB/s) that the path alone is the 30 ms of compute (+8 us).
    fast = dict(LINK, worker_bw=1e12, server_bw=1e12, latency_s=0.0, server_kernel_byte_s=10e-9)
    bsp = predict(ONE, ONE_P, 1, Cluster(workers=2, servers=1, **fast))
    # the transfer overlaps the stack's work, but the server's CPU needs 2 x 40 ms
    assert bsp.iteration_s == pytest.approx(0.080, rel=1e-9)
    assert bsp.bottleneck == "server cpu"
    asp = predict(ONE, ONE_P, 1, Cluster(workers=2, servers=1, mode="asp", **fast))
    # one worker's demands (4 us, 40 ms, 4 us) exceed its 30.008 ms path: no think time.
    # MVA: n=1: X = 1/40.008 ms, queues (1e-4, 0.9998, 1e-4); n=2: R_cpu = 40 x 1.9998 ms,
    # sum R = 80.000 ms, X = 25/s: 80 ms an iteration
    assert asp.iteration_s == pytest.approx(0.080, rel=1e-4)
    without = predict(ONE, ONE_P, 1, Cluster(workers=2, servers=1, mode="asp",
                                             **dict(fast, server_kernel_byte_s=0.0)))
    assert without.iteration_s == pytest.approx(0.030, rel=1e-3)


def test_a_shaped_links_bucket_passes_its_burst_at_once():
    # tbf with a 1 MB bucket, full at the start (the link idled): each 4 MB transfer pays
    # the wire for 3 MB (30 ms). Push 30..60 ms (in by 61), pull request at 31 ms, reply
    # 61..91 ms on the server's outlink, on the worker's downlink 62..92 ms.
    r = predict(ONE, ONE_P, 1, Cluster(workers=1, servers=1, burst_bytes=1e6, **LINK))
    assert r.iteration_s == pytest.approx(0.092, rel=1e-9)


def test_the_workers_stack_on_a_shaped_link_adds_to_its_wire():
    # 2.5 ns a byte: 10 ms per 4 MB and direction on the worker's side (cores unset: at
    # full speed). Push 30..80 ms (in by 81), reply leaves 81..121, arrives 82 + 40 + 10.
    r = predict(ONE, ONE_P, 1, Cluster(workers=1, servers=1, link_kernel_byte_s=2.5e-9,
                                       **LINK))
    assert r.iteration_s == pytest.approx(0.132, rel=1e-9)


# E8: the job's CPU on shared cores. One worker's communication costs 1 ms per exchange at
# each end (one shard) and 2 + 1 ns per byte (worker, server) of the 4 MB gradient:
# 2 x 1 + 4 x 3 = 14 ms of CPU an iteration beside its 30 ms of compute.
E8 = dict(worker_cpu_exchange_s=1e-3, worker_cpu_byte_s=2e-9, server_cpu_exchange_s=1e-3,
          server_cpu_byte_s=1e-9)
FAST = dict(worker_bw=1e9, server_bw=1e9, latency_s=0.0, message_s=0.0, server_byte_s=0.0,
            chunk_bytes=1 << 30)


def test_e8_puts_every_threads_cpu_on_the_shared_cores():
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp", cores=2, **FAST,
                                        **E8))
    # 4 workers x (30 + 14) ms of CPU on 2 cores: 88 ms, above the asp path (compute 60 ms
    # at kappa = 4/2, push and pull 4 ms each, the queue at the server link)
    assert r.iteration_s == pytest.approx(0.088)
    assert r.bottleneck == "shared cores"
    # without E8's constants the E6b bound holds instead (no CPU per byte: compute alone)
    plain = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp", cores=2, **FAST))
    assert plain.iteration_s < 0.080


def test_e8_bsp_adds_the_barrier_tail_and_yields_to_other_programs():
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, cores=2, **FAST, **E8))
    # path: compute 60 ms (kappa 2); push 60..64, server inlink 4 copies 60..76, reply out
    # 76..92: the tail after backward is 32 ms, half of it idles one of the 2 cores:
    # 88 + 16 = 104 ms
    assert r.iteration_s == pytest.approx(0.104)
    # 2 other busy programs: the job's 5 sessions get 5/7 of the 2 cores; kappa 3 makes
    # the path's compute 90 ms, the tail stays 32 ms: 4 x 44 / (10/7) + 16 = 139.2 ms
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, cores=2, background=2, **FAST,
                                        **E8))
    assert r.iteration_s == pytest.approx(0.1392)


def test_e7c_ssp_on_oversubscribed_cores_keeps_bsps_pace():
    # 4 workers + 1 server on 2 cores: the workers' unequal CPU shares keep the fast ones at
    # the staleness bound, so ssp takes bsp's iteration of the test above: 104 ms
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, cores=2, mode="ssp", **FAST, **E8))
    assert r.iteration_s == pytest.approx(0.104)
    # with a core for every process the workers drift freely and ssp is asp
    ssp, asp = (predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, cores=5, mode=m, **FAST,
                                                **E8)) for m in ("ssp", "asp"))
    assert ssp.iteration_s == pytest.approx(asp.iteration_s)
    assert ssp.iteration_s != pytest.approx(0.104)


def test_e9_compute_loses_cpu_to_refills_in_proportion_to_the_cores_share_of_others():
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp", cores=2, **FAST,
                                        **E8, refill_per_share=0.5))
    # The other threads take phi = (4 x 44 - 30) / 2 / T = 73 ms / T of a worker's core, so
    # T = 4 x (30 x (1 + 0.5 x 73/T) + 14) / 2 = 88 + 2190/T: T^2 - 88 T - 2190 = 0,
    # T = (88 + sqrt(88^2 + 4 x 2190)) / 2 = 108.234 ms
    assert r.iteration_s == pytest.approx((88 + (88 ** 2 + 4 * 2190) ** 0.5) / 2e3, rel=1e-4)
    assert r.bottleneck == "shared cores"


def test_e10_bsp_idles_a_core_until_the_balancer_fills_it_when_w_is_not_a_multiple_of_c():
    three = dict(workers=3, servers=1, cores=2, **FAST, **E8)
    # path: compute 45 ms (kappa 3/2); server inlink 3 copies 45..57, reply out 57..69: a
    # 24 ms tail, half of it idles a core: 3 x 44 / 2 + 12 = 78 ms
    assert predict(ONE, ONE_P, 64, Cluster(**three)).iteration_s == pytest.approx(0.078)
    # 3 training threads on 2 cores: the core with one runs dry and idles 5 ms before the
    # balancer moves a waiting thread to it: 78 + 5 / 2 = 80.5 ms
    r = predict(ONE, ONE_P, 64, Cluster(**three, balance_s=5e-3))
    assert r.iteration_s == pytest.approx(0.0805)
    # the idle time is at most the compute the fuller core still holds (30 ms): 78 + 15
    r = predict(ONE, ONE_P, 64, Cluster(**three, balance_s=50e-3))
    assert r.iteration_s == pytest.approx(0.093)
    # W a multiple of C (4 on 2: 104 ms as without E10), W <= C, and asp (no barrier: a
    # thread that ran dry starts its next iteration) leave it out
    four = Cluster(workers=4, servers=1, cores=2, **FAST, **E8, balance_s=5e-3)
    assert predict(ONE, ONE_P, 64, four).iteration_s == pytest.approx(0.104)
    base = predict(ONE, ONE_P, 64, Cluster(**{**three, "mode": "asp"}))
    e10 = predict(ONE, ONE_P, 64, Cluster(**{**three, "mode": "asp"}, balance_s=5e-3))
    assert e10.iteration_s == pytest.approx(base.iteration_s)
    # ssp on these oversubscribed cores keeps bsp's pace (E7c), E10 included: 80.5 ms
    r = predict(ONE, ONE_P, 64, Cluster(**{**three, "mode": "ssp"}, balance_s=5e-3))
    assert r.iteration_s == pytest.approx(0.0805)
    assert costmodel._balance_idle(1, 2, 0.03, 5e-3) == 0.0
    assert costmodel._balance_idle(5, 4, 0.03, 5e-3) == pytest.approx(3 * 5e-3)


def test_e7b_streamed_pulls_make_the_full_duplex_link_one_station_for_asp():
    # path 112 ms (as one worker above); asp W = 2 by mean value analysis. Streamed pulls
    # (E4''/E7b): one link station of 40 ms, think 72 ms; n = 1: queue 40/112; n = 2:
    # residence 40 x (1 + 40/112), iteration = think + residence.
    streamed = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, mode="asp", **LINK))
    assert streamed.iteration_s == pytest.approx(0.072 + 0.040 * (1 + 0.040 / 0.112))
    # answered whole behind the pushes (E4', runs 1-11): in and out are two stations of
    # 40 ms each, think 32 ms
    whole = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, mode="asp",
                                            streamed_pulls=False, **LINK))
    assert whole.iteration_s == pytest.approx(0.032 + 2 * 0.040 * (1 + 0.040 / 0.112))
    # bsp is the same either way
    bsp = [predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, streamed_pulls=v, **LINK))
           for v in (True, False)]
    assert bsp[0].iteration_s == pytest.approx(bsp[1].iteration_s)


def _lenet_times(tmp_path) -> pathlib.Path:
    """`ps-net time --json` lines for LeNet: conv1 2 + 3 ms, ip1 1 + 4 ms, the rest 0."""
    times = tmp_path / "lenet.json"
    rows = {"conv1": (2.0, 3.0), "ip1": (1.0, 4.0)}
    times.write_text("".join(json.dumps({"event": "layer_time", "layer": name,
                                         "forward_ms": rows.get(name, (0.0, 0.0))[0],
                                         "backward_ms": rows.get(name, (0.0, 0.0))[1]}) + "\n"
                             for name in ("conv1", "pool1", "conv2", "pool2", "ip1", "relu1",
                                          "ip2", "prob")))
    return times


def test_cli_takes_e8s_constants(tmp_path, capsys):
    times = _lenet_times(tmp_path)
    code = costmodel.main(["--time", str(times), "--net",
                           str(ROOT / "configs/nets/lenet_deploy.prototxt"), "--batch", "32",
                           "--workers", "4", "--mode", "asp", "--cores", "2",
                           "--bandwidth-gbit", "1e6", "--message-us", "0", "--latency-us", "0",
                           "--cpu-exchange-us", "500", "500", "--cpu-ns-per-byte", "1", "2",
                           "--json"])
    line = json.loads(capsys.readouterr().out)
    # LeNet's 431,080 values: 1,724,320 bytes; x = 1 ms + 1,724,320 x 3 ns = 6.17296 ms;
    # 4 workers x (10 ms + x) on 2 cores: 32.3459 ms
    assert code == 0 and line["iteration_ms"] == pytest.approx(2 * (10 + 6.17296), rel=1e-5)
    assert line["bottleneck"] == "shared cores"


def test_cli_takes_e10s_latency(tmp_path, capsys):
    times = _lenet_times(tmp_path)
    base = ["--time", str(times), "--net", str(ROOT / "configs/nets/lenet_deploy.prototxt"),
            "--batch", "32", "--workers", "3", "--mode", "bsp", "--cores", "2",
            "--bandwidth-gbit", "1e6", "--message-us", "0", "--latency-us", "0",
            "--cpu-exchange-us", "500", "500", "--cpu-ns-per-byte", "1", "2", "--json"]
    assert costmodel.main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert costmodel.main(base + ["--balance-ms", "4"]) == 0
    e10 = json.loads(capsys.readouterr().out)
    # 3 workers on 2 cores: one core idles min(4 ms, the 10 ms compute) an iteration, half
    # an iteration's worth of both cores: 2 ms more
    assert plain["bottleneck"] == e10["bottleneck"] == "shared cores"
    assert e10["iteration_ms"] - plain["iteration_ms"] == pytest.approx(2.0, rel=1e-6)


def test_e11_servers_beside_the_workers_and_one_push_per_host():
    """4 workers on 2 hosts (2 each, one 100 MB/s link a host), two 2 MB parameters."""
    params = [Param("fc", "fc/weight", MB4 // 2), Param("fc", "fc/bias", MB4 // 2)]
    hosts = dict(LINK, workers_per_host=2)
    # today: one server on a host of its own takes 4 x 4 MB in, then sends them out
    old = predict(ONE, params, 64, Cluster(workers=4, servers=1, **hosts))
    assert old.iteration_s == pytest.approx(0.352)
    assert old.busy_s["server link"] == pytest.approx(0.160)
    assert old.busy_s["worker link"] == pytest.approx(0.080)   # a host's two workers
    # a shard beside each host's workers: host 0's NIC carries its workers' pushes to
    # shard 1 (2 x 2 MB) out and host 1's pushes to shard 0 (2 x 2 MB) in: 80 ms a
    # direction. Out 30..70 (pushes to shard 1), in 31..71 (host 1's pushes to shard 0);
    # shard 1 in 31..71 on host 1's NIC. Replies at 71: shard 0's to host 1 out on host 0's
    # NIC 71..111, its piece to this worker through memory at once (71); shard 1's 2
    # copies leave host 1 71..111 and come in on host 0's NIC 72..112
    beside = predict(ONE, params, 64, Cluster(workers=4, servers=2, servers_beside_workers=True,
                                              **hosts))
    assert beside.busy_s["worker link"] == pytest.approx(0.080)
    assert beside.busy_s["server link"] == 0.0
    assert beside.iteration_s == pytest.approx(0.112)
    # and one push per host: each shard gets one remote copy (20 ms), after backward:
    # in 31..51 both; replies 51..71 out, shard 1's piece on the host link 52..72
    both = predict(ONE, params, 64, Cluster(workers=4, servers=2, servers_beside_workers=True,
                                            host_aggregation=True, **hosts))
    assert both.busy_s["worker link"] == pytest.approx(0.040)
    assert both.iteration_s == pytest.approx(0.072)
    assert both.images_per_s == pytest.approx(4 * 64 / 0.072)
    # ssp ignores the switch (each worker pushes on its own clock)
    assert Cluster(workers=4, servers=2, mode="ssp", host_aggregation=True,
                   workers_per_host=2).pushers() == (4, 2)


# ---- issue 32's switches as inputs (docs/scaling.md E1b, E3, E11): each against a hand
# computation on the toy net above (one layer, 30 ms of compute, 100 MB/s links, 1 ms)

FC = [Param("fc", "fc/weight", 1000 * 1000, fc_shape=(1000, 1000))]   # 4 MB, 1000 x 1000


def test_e1b_factors_go_to_each_shard_for_the_rows_its_chunks_span():
    # 450,500 values a chunk: [0, 450500) rows 0-450 -> shard 0, [450500, 901000) rows
    # 450-900 -> shard 1, [901000, 1e6) rows 901-999 -> shard 0 (the lighter, tie: lower).
    # Shard 0 spans rows 0-999 (touches 451 + 99), shard 1 rows 450-900 (451): batch 64,
    # 4 bytes x 64 x (rows + 1000 columns)
    cl = Cluster(workers=1, servers=2, sufficient_factors=True,
                 **dict(LINK, chunk_bytes=4 * 450_500))
    got = costmodel.pieces(ONE, FC, 64, cl)["fc"]
    assert [(p.shard, p.values, p.push, p.pull, p.staged, p.flops) for p in got] == [
        (0, 549_500, 4 * 64 * 2000, 4 * 549_500, 4 * 64 * 2000, 2 * 550 * 1000 * 64),
        (1, 450_500, 4 * 64 * 1451, 4 * 450_500, 4 * 64 * 1451, 2 * 451 * 1000 * 64)]
    # off: the dense gradient, nothing to rebuild
    dense = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, sufficient_factors=False))
    assert [(p.push, p.flops) for p in dense["fc"]] == [(4 * 549_500, 0), (4 * 450_500, 0)]


def test_e1b_factors_cut_the_push_and_the_rebuild_costs_the_shard():
    on = dict(LINK, sufficient_factors=True)
    # 64 x 2000 floats = 512 KB pushed (5.12 ms) instead of 4 MB; the pull stays dense:
    # 30 + 5.12 + 1 + 40 + 1 ms
    r = predict(ONE, FC, 64, Cluster(workers=1, servers=1, **on))
    assert r.iteration_s == pytest.approx(0.07712)
    # the shard rebuilds 2 x 1000 x 1000 x 64 = 128 Mflop at 0.1 ns a flop: 12.8 ms more,
    # 6.4 ms on 2 threads
    gemm = dict(on, server_flop_s=1e-10)
    assert predict(ONE, FC, 64, Cluster(workers=1, servers=1, **gemm)).iteration_s == \
        pytest.approx(0.07712 + 0.0128)
    assert predict(ONE, FC, 64, Cluster(workers=1, servers=1, server_threads=2,
                                        **gemm)).iteration_s == pytest.approx(0.07712 + 0.0064)
    # batch 600: 4.8 MB of factors is more than the 4 MB gradient: pushed dense
    assert predict(ONE, FC, 600, Cluster(workers=1, servers=1, **on)).iteration_s == \
        pytest.approx(0.112)
    # a plain fc bias or a Param without fc_shape is never factored
    assert predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, **on)).iteration_s == \
        pytest.approx(0.112)


def test_e13_broadcast_pulls_every_pushers_factors_relayed_by_the_shards():
    """E13: a 1000 x 1000 weight, batch 64, on 2 shards (the chunks of the E1b test above:
    shard 0 touches rows 0-450 and 901-999, 550 rows; shard 1 rows 450-900, 451). A
    worker pulls from shard k the L rows its chunks touch from all P pushers, P x 64 x
    r_k values, and the R factors (64 x 1000) of the pushers shard k holds for, worker w
    on holders[w % 2]."""
    cl = Cluster(workers=4, servers=2, factor_broadcast=True,
                 **dict(LINK, chunk_bytes=4 * 450_500))
    got = costmodel.pieces(ONE, FC, 64, cl)["fc"]
    # P = 4: shard 0 relays workers 0 and 2, shard 1 workers 1 and 3
    pulled = [4 * (4 * 64 * 550 + 2 * 64 * 1000), 4 * (4 * 64 * 451 + 2 * 64 * 1000)]
    assert [p.pull for p in got] == pulled == [1_075_200, 973_824]
    # in all 4 x 64 x (1000 + 1000) values, and one row (450) both shards touch
    assert sum(pulled) == 4 * (4 * 64 * 2000 + 4 * 64 * 1)
    # the push is E1b's (the rows each shard's chunks span, float32)
    assert [p.push for p in got] == [4 * 64 * 2000, 4 * 64 * 1451]
    # every worker rebuilds the whole step of the 4 pushers: 2 x 4 x 64 x (its values)
    assert [(p.worker_flops, p.replica_bytes, p.pull_staged) for p in got] == [
        (2 * 4 * 64 * 549_500, 4 * 549_500, pulled[0]), (2 * 4 * 64 * 450_500, 4 * 450_500,
                                                         pulled[1])]
    # P = 3: shard 0 holds for workers 0 and 2, shard 1 for worker 1 alone
    three = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, workers=3))["fc"]
    assert [p.pull for p in three] == [4 * (3 * 64 * 550 + 2 * 64 * 1000),
                                       4 * (3 * 64 * 451 + 1 * 64 * 1000)]
    # 16-bit factors (fp16/bf16 pushes, CPU workers) halve both directions
    half = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, factor_value_bytes=2.0))["fc"]
    assert [(p.push, p.pull) for p in half] == [(2 * 64 * 2000, pulled[0] / 2),
                                                (2 * 64 * 1451, pulled[1] / 2)]
    # a weight the push side sends dense (batch 600: factors bigger) is pulled dense
    dense = costmodel.pieces(ONE, FC, 600, cl)["fc"]
    assert [(p.pull, p.pull_staged, p.worker_flops) for p in dense] == [
        (4 * 549_500, None, 0.0), (4 * 450_500, None, 0.0)]


def test_e13_the_worker_rebuilds_the_broadcast_step_before_the_next_forward():
    on = dict(LINK, factor_broadcast=True, worker_flop_s=1e-10, worker_apply_byte_s=1e-9)
    # one worker: 64 x 2000 floats each way (512 KB, 5.12 ms); the worker rebuilds
    # 2 x 1 x 64 x 1e6 = 128 Mflop (12.8 ms) and steps 4 MB at 1 ns a byte (4 ms):
    # 30 + 5.12 + 1 + 5.12 + 1 + 12.8 + 4 ms
    r = predict(ONE, FC, 64, Cluster(workers=1, servers=1, **on))
    assert r.iteration_s == pytest.approx(0.030 + 0.00512 + 0.001 + 0.00512 + 0.001 + 0.0128
                                          + 0.004)
    # 4 pushers, bsp: the inlink takes 4 x 512 KB, each reply is 4 x 64 x 2000 floats
    # (2.048 MB: 20.48 ms) and the outlink sends 4 of them; the rebuild is 4 x 12.8 ms:
    # 30 + 4 x 5.12 + 1 + 4 x 20.48 + 1 + 51.2 + 4 ms
    four = predict(ONE, FC, 64, Cluster(workers=4, servers=1, **on))
    assert four.iteration_s == pytest.approx(0.030 + 4 * 0.00512 + 0.001 + 4 * 0.02048 + 0.001
                                             + 0.0512 + 0.004)
    with pytest.raises(CostModelError, match="factor_broadcast \\(E13, transport.sufficient_"
                                             "factors: broadcast\\) is bsp only, got mode 'asp'"):
        predict(ONE, FC, 64, Cluster(workers=4, servers=1, mode="asp", **on))


def test_e13_holder_pushes_r_once_and_the_other_shards_get_it_forwarded():
    """E13, factor_right "holder" (issue 32, R pushed once): the chunks of the E1b test
    (shard 0 spans rows 0-999, shard 1 rows 450-900), 4 workers, batch 64: a worker pushes
    L's span to each shard and its R (64 x 1000) to its holder only (holders[w % 2]: each
    shard holds for 2 of the 4 pushers, so per pusher half an R); the other half of the R's
    each shard needs comes from a forwarder worker."""
    cl = Cluster(workers=4, servers=2, factor_broadcast=True, factor_right="holder",
                 servers_beside_workers=True, **dict(LINK, chunk_bytes=4 * 450_500))
    got = costmodel.pieces(ONE, FC, 64, cl)["fc"]
    half_r = 4 * 64 * 1000 / 2
    # beside: the forwarded half goes through memory on the shard's host, not the NIC;
    # the forwarder must first have every pusher's R (4 x 64 x 1000 floats); the replies'
    # R's (2 pushers' a shard) go ahead of the step
    assert [(p.push, p.staged, p.forwarded, p.forward_wait, p.early_reply) for p in got] == [
        (4 * 64 * 1000 + half_r, 4 * 64 * 1000 + half_r, half_r, 4 * 4 * 64 * 1000,
         4 * 2 * 64 * 1000),
        (4 * 64 * 451 + half_r, 4 * 64 * 451 + half_r, half_r, 4 * 4 * 64 * 1000,
         4 * 2 * 64 * 1000)]
    # a worker's push is (S - 1) x s x c x 4 bytes less than every_shard's: one R, not two
    every = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, factor_right="every_shard"))
    assert sum(p.push for p in every["fc"]) - sum(p.push for p in got) == (2 - 1) * 64 * 1000 * 4
    assert all((p.forwarded, p.forward_wait, p.early_reply) == (0, 0, 0) for p in every["fc"])
    # the pull is E13's either way
    assert [p.pull for p in got] == [p.pull for p in every["fc"]]
    # servers apart: the forwarder's uplink carries the lacking R's (the same bytes as
    # every_shard, averaged over the workers), nothing goes through memory
    apart = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, servers_beside_workers=False))
    assert [(p.push, p.forwarded) for p in apart["fc"]] == [(4 * 64 * 2000, 0.0),
                                                            (4 * 64 * 1451, 0.0)]
    # 16-bit factors: half of every byte count
    half = costmodel.pieces(ONE, FC, 64, dataclasses.replace(cl, factor_value_bytes=2.0))["fc"]
    assert [(p.push, p.forwarded) for p in half] == [(2 * 64 * 1000 + half_r / 2, half_r / 2),
                                                     (2 * 64 * 451 + half_r / 2, half_r / 2)]
    # FactorCapture's rule is unchanged (R counted per shard), so no weight changes its
    # path: batch 400 is 4 x 400 x (1451 + 2000) = 5.5 MB of factors against the 4 MB
    # gradient, dense either way (4 x 400 x 2451 = 3.9 MB would pass a rule of R once)
    for right in ("every_shard", "holder"):
        assert costmodel.pieces(ONE, FC, 400, dataclasses.replace(
            cl, factor_right=right))["fc"][0].flops == 0.0
    # the host link carries less; the step waits for the forward
    on, off = (predict(ONE, FC, 64, dataclasses.replace(cl, factor_right=r))
               for r in ("holder", "every_shard"))
    assert on.busy_s["worker link"] < off.busy_s["worker link"]
    with pytest.raises(CostModelError, match="factor_right 'holder' needs factor_broadcast "
                                             "\\(E13: R reaches the other shards through the "
                                             "relay\\)"):
        predict(ONE, FC, 64, dataclasses.replace(cl, factor_broadcast=False))
    with pytest.raises(CostModelError, match="factor_right must be one of every_shard, holder, "
                                             "got 'once'"):
        predict(ONE, FC, 64, dataclasses.replace(cl, factor_right="once"))


def test_e13_holder_the_other_shards_step_waits_for_the_forward():
    """By hand, one worker, 2 shards apart, the weight cut in halves (rows 0-499 on shard 0,
    500-999 on shard 1), batch 64: shard 0 is the worker's holder. Both pushes are 384 KB
    (3.84 ms): to shard 0 L's 500 rows and R; to shard 1 L's 500 rows, and R forwarded.
    Forward 0-10 ms, backward 10-30; the two pushes share the uplink (E2e): both leave
    30-37.68, in at 38.68."""
    cl = Cluster(workers=1, servers=2, factor_broadcast=True,
                 **dict(LINK, chunk_bytes=2_000_000))
    # every_shard: replies of 384 KB (L and R) from shard 0 and 128 KB (L) from shard 1,
    # both from 38.68, share the downlink from 39.68: shard 1's in at 42.24, shard 0's
    # 256 KB left alone until 44.80
    assert predict(ONE, FC, 64, cl).iteration_s == pytest.approx(0.0448)
    # holder: shard 1 steps once the forwarder has the R from shard 0 (256 KB on its
    # downlink 39.68-42.24, three latencies: 37.68 + 3 + 2.56 = 43.24); shard 0's reply is L
    # alone (R went ahead): 128 KB, out 38.68-39.96, on the downlink after the R, in at
    # 43.52; shard 1's leaves 43.24, in at 45.52
    holder = predict(ONE, FC, 64, dataclasses.replace(cl, factor_right="holder"))
    assert holder.iteration_s == pytest.approx(0.04552)


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_cli_takes_factor_right(tmp_path, capsys):
    net = tmp_path / "fc.prototxt"
    net.write_text('layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 64 '
                   'dim: 1000 } } }\nlayer { name: "fc" type: "InnerProduct" bottom: "x" '
                   'top: "y" inner_product_param { num_output: 1000 bias_term: false } }\n')
    times = tmp_path / "t.json"
    times.write_text(json.dumps({"event": "layer_time", "layer": "fc", "forward_ms": 10.0,
                                 "backward_ms": 20.0}) + "\n")
    argv = ["--time", str(times), "--net", str(net), "--batch", "64", "--workers", "4",
            "--servers", "2", "--chunk-bytes", str(4 * 450_500), "--servers-per-host",
            "--factor-broadcast", "--json"]
    got = {}
    for right in ("every_shard", "holder"):
        assert costmodel.main(argv + ["--factor-right", right]) == 0
        got[right] = json.loads(capsys.readouterr().out)["iteration_ms"]
    cl = Cluster(workers=4, servers=2, factor_broadcast=True, servers_beside_workers=True,
                 worker_bw=1.25e9, server_bw=1.25e9, latency_s=50e-6, message_s=20e-6,
                 chunk_bytes=4 * 450_500)
    params = costmodel.net_params(net)
    for right, ms in got.items():
        want = predict(ONE, params, 64, dataclasses.replace(cl, factor_right=right))
        assert ms == pytest.approx(want.iteration_s * 1e3)
    assert got["holder"] != got["every_shard"]
    assert costmodel.main(argv + ["--factor-right", "holder", "--mode", "asp"]) == 2
    assert "is bsp only" in capsys.readouterr().err


# E12: three layers in forward order a, b, c, 10 ms forward and 10 ms backward each; a and b
# hold 1 MB (10 ms on a 100 MB/s link), c 2 MB (20 ms)
ABC = [LayerTime("a", 10.0, 10.0), LayerTime("b", 10.0, 10.0), LayerTime("c", 10.0, 10.0)]
ABC_P = [Param("a", "a/weight", 250_000), Param("b", "b/weight", 250_000),
         Param("c", "c/weight", 500_000)]


def test_e12_the_pull_overlaps_the_next_forward_in_forward_order():
    """By hand, one worker and one shard: forward 0-30 ms; backward c 30-40, b 40-50,
    a 50-60; pushes c 40-60, b 60-70, a 70-80 on the uplink, applied as they arrive (1 ms
    later): c 61, b 71, a 81. The pull request comes after backward: 60 + 1 = 61."""
    # today: replies in the order applied, c 61-81, b 81-91, a 91-101 on the shard's
    # outlink, in 1 ms later; the next forward waits for all: 102 ms an iteration
    today = predict(ABC, ABC_P, 64, Cluster(workers=1, servers=1, **LINK))
    assert today.iteration_s == pytest.approx(0.102)
    # E12 with no window: at 81 the outlink is free and b (ready at 71) and a (81) wait:
    # a first. Replies c 61-81, a 81-91, b 91-101 arrive at 82, 92, 102. Forward: a at
    # max(60, 92) = 92-102, b at max(102, 102) 102-112, c 112-122 (c's reply was in at 82):
    # 122 - 30 = 92 ms from the end of one forward to the next
    cl = Cluster(workers=1, servers=1, pull_overlap=True, pull_window_bytes=0.0, **LINK)
    assert predict(ABC, ABC_P, 64, cl).iteration_s == pytest.approx(0.092)
    # a window of 1 MB: the shard queues b behind c at 71 (the outlink 10 ms from free),
    # before a is ready; a goes last (91-101, in at 102): a 102-112, b 112-122, c 122-132
    window = dataclasses.replace(cl, pull_window_bytes=1e6)
    assert predict(ABC, ABC_P, 64, window).iteration_s == pytest.approx(0.102)
    # forward 20 ms a layer: everything 30 ms later (backward ends at 90, replies c, a, b
    # in at 112, 122, 132); a 122-142, b 142-162 (its reply in at 132: hidden), c 162-182:
    # 182 - 60 = 122 ms, of which 32 exposed (a's wait), against 132 (42) today
    slow = [LayerTime(l.name, 20.0, 10.0) for l in ABC]
    hidden = predict(slow, ABC_P, 64, cl)
    assert hidden.iteration_s == pytest.approx(0.122)
    assert hidden.exposed_s == pytest.approx(0.032)
    assert predict(slow, ABC_P, 64, Cluster(workers=1, servers=1, **LINK)).iteration_s == \
        pytest.approx(0.132)


def test_e3_the_shards_io_thread_caps_its_links():
    # 20 ns a wire byte on the shard's I/O thread: 50 MB/s, below the 100 MB/s NIC. The
    # push leaves the worker 30..70 ms but is in at 31 + 80 = 111 ms; the reply leaves
    # 111..191 and arrives at 192 ms
    r = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, server_io_byte_s=20e-9, **LINK))
    assert r.iteration_s == pytest.approx(0.192)
    assert r.busy_s["server link"] == pytest.approx(0.080)
    # faster than the NIC: the NIC sets the pace (112 ms, the first test)
    fast = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, server_io_byte_s=5e-9, **LINK))
    assert fast.iteration_s == pytest.approx(0.112)


def test_e11_the_host_leaders_sum_delays_its_push():
    # 4 workers, 2 a host, one server apart, one push per host: 2 pushers. The push leaves
    # after backward, 30..70 ms on the host link, plus the leader's sum of its second
    # member's 4 MB at 20 ns a byte (80 ms): out at 150, in at the server by 151 (2
    # copies: 31..111 otherwise); replies 151..231, in at 232 ms
    hosts = dict(LINK, workers_per_host=2, host_aggregation=True)
    r = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, host_sum_byte_s=20e-9, **hosts))
    assert r.iteration_s == pytest.approx(0.232)
    free = predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, **hosts))
    assert free.iteration_s == pytest.approx(0.192)      # 30 + 1 + 2 x 40 + 2 x 40 + 1
    # without aggregation the sum is not made (ssp: each worker pushes on its own clock)
    assert predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp",
                                           host_sum_byte_s=20e-9, **hosts)).iteration_s == \
        predict(ONE, ONE_P, 64, Cluster(workers=4, servers=1, mode="asp", **hosts)).iteration_s


def test_e11_a_shard_on_every_host_spreads_the_server_nics_load():
    # 4 hosts, one worker each, four 1 MB parameters, one a shard (bsp)
    params = [Param("fc", f"fc/{i}", MB4 // 4) for i in range(4)]
    apart = predict(ONE, params, 64, Cluster(workers=4, servers=4, **LINK))
    # four server hosts of their own: each NIC takes 4 x 1 MB (40 ms) a direction; the four
    # pushes share the uplink 30..70 ms (E2e), each shard's 4 copies in 31..71; replies out
    # 71..111, the four sharing the downlink 72..112
    assert apart.busy_s["server link"] == pytest.approx(0.040)
    assert apart.busy_s["worker link"] == pytest.approx(0.040)
    assert apart.iteration_s == pytest.approx(0.112)
    beside = predict(ONE, params, 64, Cluster(workers=4, servers=4, servers_beside_workers=True,
                                              **LINK))
    # a shard beside each worker: no server NIC, and each host's NIC carries 3 x 1 MB of
    # its worker's pushes plus 3 x 1 MB of its shard's replies out (and as much in): 60 ms.
    # Shard 0's piece goes through memory; the three others share the uplink 30..60 ms, every
    # shard takes 3 remote copies in 31..61 (shard 0 on host 0's downlink); shard 0's reply
    # at once (61), the others out 61..91 and sharing the downlink 62..92
    assert beside.busy_s["server link"] == 0.0
    assert beside.busy_s["worker link"] == pytest.approx(0.060)
    assert beside.iteration_s == pytest.approx(0.092)
    one = predict(ONE, params, 64, Cluster(workers=4, servers=1, **LINK))
    assert one.iteration_s == pytest.approx(0.352)   # one server apart: 30 + 2 x 160 + 2
    # unequal shards (2, 1, 0.5, 0.5 MB), fp16 pushes: host 0's NIC sends its worker's
    # pushes to shards 1-3 (1 MB in fp16) and shard 0's 2 MB replies to 3 hosts (6 MB): 70
    # ms; it takes in 2 MB of replies and 3 x 1 MB of pushes to shard 0: 50 ms
    sizes = [Param("fc", f"fc/{i}", v) for i, v in enumerate((500_000, 250_000, 125_000,
                                                               125_000))]
    skew = predict(ONE, sizes, 64, Cluster(workers=4, servers=4, servers_beside_workers=True,
                                           push_value_bytes=2.0, **LINK))
    assert skew.busy_s["worker link"] == pytest.approx(0.070)


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_net_params_know_the_fc_weights_shape():
    alexnet = {p.name: p for p in costmodel.net_params(ROOT / "configs/nets/alexnet_deploy.prototxt")}
    assert alexnet["fc6/weight"].fc_shape == (4096, 9216)
    assert alexnet["fc8/weight"].fc_shape == (1000, 4096)
    assert alexnet["fc6/bias"].fc_shape is None and alexnet["conv1/weight"].fc_shape is None


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_cli_takes_issue_32s_switches(capsys):
    time_file = ROOT / "bench/data/h200_alexnet_time.json"
    net = ROOT / "configs/nets/alexnet_deploy.prototxt"
    code = costmodel.main(["--time", str(time_file), "--net", str(net), "--batch", "128",
                           "--workers", "8", "--servers", "8", "--bandwidth-gbit", "25",
                           "--compression", "fp16", "--pull-compression", "bf16",
                           "--servers-per-host", "--sufficient-factors",
                           "--server-ns-per-byte", "0.2", "--server-threads", "4",
                           "--server-ns-per-flop", "0.01", "--server-io-ns-per-byte", "1.0",
                           "--json"])
    line = json.loads(capsys.readouterr().out)
    want = predict(costmodel.load_layer_times(time_file), costmodel.net_params(net), 128,
                   Cluster(workers=8, servers=8, worker_bw=25 * 1.25e8, server_bw=25 * 1.25e8,
                           push_value_bytes=2.0, pull_value_bytes=2.0,
                           servers_beside_workers=True, sufficient_factors=True,
                           # fp16 pushes carry the factors in fp16 too (ps-worker)
                           factor_value_bytes=2.0,
                           server_byte_s=0.2e-9, server_threads=4, server_flop_s=0.01e-9,
                           server_io_byte_s=1.0e-9))
    # the shard's I/O thread at 1 GB/s is slower than the 25 GbE link: it sets the pace
    assert want.busy_s["worker link"] < want.iteration_s
    assert code == 0 and line["iteration_ms"] == pytest.approx(want.iteration_s * 1e3)
    # E14: CURVE at 0.6 ns a wire byte on 2 I/O threads a worker and a shard
    code = costmodel.main(["--time", str(time_file), "--net", str(net), "--batch", "128",
                           "--workers", "8", "--servers", "8", "--bandwidth-gbit", "25",
                           "--curve-ns-per-byte", "0.6", "--worker-io-threads", "2",
                           "--server-io-threads", "2", "--json"])
    line = json.loads(capsys.readouterr().out)
    curve = dict(workers=8, servers=8, worker_bw=25 * 1.25e8, server_bw=25 * 1.25e8,
                 curve_byte_s=0.6e-9, worker_io_threads=2, server_io_threads=2)
    want = predict(costmodel.load_layer_times(time_file), costmodel.net_params(net), 128,
                   Cluster(**curve))
    assert code == 0 and line["iteration_ms"] == pytest.approx(want.iteration_s * 1e3)
    # one thread a side (1.7 GB/s) is slower than the 3.1 GB/s link, two (3.3) are not
    one = predict(costmodel.load_layer_times(time_file), costmodel.net_params(net), 128,
                  Cluster(**dict(curve, worker_io_threads=1, server_io_threads=1)))
    assert one.iteration_s > want.iteration_s


def test_e2c_a_nics_dma_overlaps_the_workers_cpu_per_byte():
    # 5 ns a byte of the worker's CPU: 20 ms a direction for the 4 MB beside 40 ms of wire.
    # In series (loopback, veth): 30 + (40 + 20) + 1 + (40 + 20) + 1 ms
    cpu = dict(LINK, worker_byte_s=5e-9)
    assert predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, **cpu)).iteration_s == \
        pytest.approx(0.152)
    # beside the NIC's DMA: the wire sets the pace, as without CPU (112 ms)
    on = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, pipelined_nic=True, **cpu))
    assert on.iteration_s == pytest.approx(0.112)
    assert on.busy_s["worker link"] == pytest.approx(0.040)
    # a CPU slower than the wire (15 ns: 60 ms) sets it instead: 30 + 60 + 1 + 60 + 1 ms
    slow = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, pipelined_nic=True,
                                           **dict(LINK, worker_byte_s=15e-9)))
    assert slow.iteration_s == pytest.approx(0.152)


def test_e2d_io_threads_spread_the_workers_cpu_per_byte():
    # 5 ns a byte in series (the E2c test above: 152 ms), 0.8 of it on the I/O threads.
    # One shard: one connection, so a second I/O thread changes nothing.
    cpu = dict(LINK, worker_byte_s=5e-9, worker_io_share=0.8)
    one = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, worker_io_threads=2, **cpu))
    assert one.iteration_s == pytest.approx(0.152)
    # Two shards, two threads: 5 x (0.2 + 0.8 / 2) = 3 ns a byte, 12 ms a direction for
    # the 4 MB: as with 3 ns on one thread.
    two = Cluster(workers=1, servers=2, worker_io_threads=2, **cpu)
    assert two.worker_wall_byte_s() == pytest.approx(3e-9)
    assert predict(ONE, ONE_P, 64, two).iteration_s == pytest.approx(
        predict(ONE, ONE_P, 64, Cluster(workers=1, servers=2,
                                        **dict(LINK, worker_byte_s=3e-9))).iteration_s)
    assert predict(ONE, ONE_P, 64, two).iteration_s < predict(
        ONE, ONE_P, 64, Cluster(workers=1, servers=2, **dict(cpu))).iteration_s
    # more threads than shards: one connection a thread at most
    assert Cluster(workers=1, servers=2, worker_io_threads=8, **cpu).worker_wall_byte_s() == \
        pytest.approx(3e-9)
    with pytest.raises(CostModelError, match="worker_io_threads must be >= 1"):
        predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, worker_io_threads=0, **cpu))


def test_e14_curve_caps_each_end_at_its_io_threads_rate():
    # CURVE at 5 ns a wire byte: 200 MB/s an I/O thread, above the 100 MB/s links and beside
    # the wire (message by message): nothing changes, 30 + 40 + 1 + 40 + 1 ms
    assert predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, curve_byte_s=5e-9,
                                           **LINK)).iteration_s == pytest.approx(0.112)
    # at 20 ns, 50 MB/s at each end: the 4 MB push leaves in 80 ms (30..110) and arrives
    # at the shard by 111, its reply leaves by 191 and arrives (cut-through) at 192
    slow = predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, curve_byte_s=20e-9, **LINK))
    assert slow.iteration_s == pytest.approx(0.192)
    assert slow.busy_s["worker link"] == pytest.approx(0.080)
    # a worker's link: 40 ns a byte on two threads (two shards, a connection each) is
    # 50 MB/s; with a shard beside it only one connection crosses the NIC: 25 MB/s
    two = dict(LINK, workers=1, servers=2, worker_io_threads=2, curve_byte_s=40e-9)
    assert Cluster(**two).worker_link_bw() == pytest.approx(5e7)
    assert Cluster(**two, servers_beside_workers=True).worker_link_bw() == pytest.approx(2.5e7)
    assert Cluster(**dict(two, worker_io_threads=8)).worker_link_bw() == pytest.approx(5e7)
    # a shard's threads serve its pushers' connections: 8 threads for 2 workers are 2, 40 ns
    # a byte on them 50 MB/s, 160 ms a direction for the two 4 MB pushes
    r = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, curve_byte_s=40e-9,
                                        server_io_threads=8, **LINK))
    assert r.busy_s["server link"] == pytest.approx(0.16)
    # the shard's I/O thread: 20 ns a byte is 50 MB/s, below its 100 MB/s NIC, so 2 workers'
    # 4 MB keep its link 160 ms a direction; 4 I/O threads a shard give it 200 MB/s, the
    # NIC binds again (80 ms)
    for threads, busy in ((1, 0.16), (4, 0.08)):
        r = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, curve_byte_s=20e-9,
                                            server_io_threads=threads, **LINK))
        assert r.busy_s["server link"] == pytest.approx(busy)
    # E3's I/O cost is divided among the threads too: 15 + 15 ns on 2 threads is 15 ns a
    # byte, 66.7 MB/s: 120 ms for the 8 MB
    assert predict(ONE, ONE_P, 64, Cluster(
        workers=2, servers=1, curve_byte_s=15e-9, server_io_byte_s=15e-9, server_io_threads=2,
        **LINK)).busy_s["server link"] == pytest.approx(2 * 4 * MB4 * 15e-9)
    with pytest.raises(CostModelError, match="server_io_threads must be >= 1"):
        predict(ONE, ONE_P, 64, Cluster(workers=1, servers=1, server_io_threads=0, **LINK))


def test_e8_with_one_push_per_host_counts_the_pushers_exchanges_only():
    # 4 workers, 2 a host, on 2 cores, 30 ms of compute and 40 ms of E8 CPU (4 MB at 10 ns)
    # an exchange: every worker exchanging, (4 x 30 + 4 x 40) / 2 = 140 ms; one push per
    # host, 2 pushers exchange: (4 x 30 + 2 x 40) / 2 = 100 ms (the fast links add 16 us)
    for agg, ms in ((False, 140), (True, 100)):
        r = predict(ONE, ONE_P, 64, Cluster(
            workers=4, servers=1, worker_bw=1e12, server_bw=1e12, latency_s=0.0, message_s=0.0,
            chunk_bytes=1 << 30, cores=2, worker_cpu_byte_s=10e-9, workers_per_host=2,
            host_aggregation=agg))
        assert r.bottleneck == "shared cores"
        assert r.iteration_s == pytest.approx(ms / 1e3, abs=2e-5)


def test_shards_on_one_host_share_its_nic():
    # 4 MB in 1 MiB chunks over 2 shards, 2 workers: shard 0's link carries 2 workers x its
    # 2 chunks (2 x 4 x 524288 B: 41.9 ms at 100 MB/s) a direction, the one host's NIC both
    # shards' 2 x 4 MB (80 ms)
    two = dict(LINK, chunk_bytes=1 << 20)
    apart = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=2, **two))
    one_host = predict(ONE, ONE_P, 64, Cluster(workers=2, servers=2, server_hosts=1, **two))
    assert apart.busy_s["server link"] == pytest.approx(2 * 4 * 524288 / 1e8)
    assert one_host.busy_s["server link"] == pytest.approx(0.08)
    # apart: shard 0's 2,097,152 B and shard 1's 1,902,848 B share the uplink (E2e), shard 1's
    # done at 68.06 ms, shard 0's at 70; each shard's 2 copies in 31..72.94 and 31..69.06;
    # replies out until 114.89 (shard 0) and 107.11, in at 115.89
    assert apart.iteration_s == pytest.approx(0.030 + 0.001 + 2 * 2 * 2097152 / 1e8 + 0.001)
    # one host: both shards' 8 MB share its NIC in (31..111) and out (107.11..187.11: shard
    # 1's last copy in first), in at 188.11
    assert one_host.iteration_s == pytest.approx(0.030 + 0.001 + 2 * 2 * 1902848 / 1e8 + 0.080
                                                 + 0.001)
    # one shard: nothing to share
    assert predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1, server_hosts=1, **two)) \
        .iteration_s == pytest.approx(predict(ONE, ONE_P, 64, Cluster(workers=2, servers=1,
                                                                       **two)).iteration_s)


def test_e11_e12_a_shard_on_every_host_replies_between_its_hosts_pushes():
    """Two workers on two hosts, a shard beside each, the early pull (request at 31 ms).
    Placement: c (2 MB) on shard 0, a and b (1 MB each) on shard 1. By hand: backward c
    30-40 (to shard 0 through memory; host 1's copy comes in on host 0's downlink 41-61),
    b 40-50 (pushed 50-60, in on shard 1 at 61), a 50-60 (pushed 60-70, in at 71); applied
    c 61, b 61, a 71. Host 0's uplink is busy with this worker's pushes 50-70, and every
    host's uplink with its own the same way (hosts alike)."""
    cl = Cluster(workers=2, servers=2, servers_beside_workers=True, early_pull=True, **LINK)
    # c's reply to host 1 waits for the push of a: 70-90; this worker has c at 61 (memory).
    # b leaves host 1 at 70 (its push of a 60-70 first), 70-80, in at 81; a 80-90, in at 91
    today = predict(ABC, ABC_P, 64, cl)
    assert today.iteration_s == pytest.approx(0.091)
    # E12, no window: the same order (c is in memory at once, b before a is ready); the
    # forward a at max(60, 91) 91-101, b 101-111, c 111-121: 121 - 30 = 91
    e12 = predict(ABC, ABC_P, 64, dataclasses.replace(cl, pull_overlap=True,
                                                      pull_window_bytes=0.0))
    assert e12.iteration_s == pytest.approx(0.091)


@pytest.mark.skipif(caffe_schema.messages() is None, reason="protoc not installed")
def test_cli_takes_e12_and_e13(capsys):
    time_file = ROOT / "bench/data/h200_alexnet_time.json"
    net = ROOT / "configs/nets/alexnet_deploy.prototxt"
    flags = ["--time", str(time_file), "--net", str(net), "--batch", "128",
             "--workers", "8", "--servers", "8", "--bandwidth-gbit", "25",
             "--servers-per-host", "--pull-overlap", "--pull-window-kb", "512",
             "--factor-broadcast", "--factor-bytes", "2",
             "--worker-ns-per-flop", "0.001", "--worker-apply-ns-per-byte", "0.01", "--json"]
    code = costmodel.main(flags)
    line = json.loads(capsys.readouterr().out)
    layers, params = costmodel.load_layer_times(time_file), costmodel.net_params(net)
    base = dict(workers=8, servers=8, worker_bw=25 * 1.25e8, server_bw=25 * 1.25e8,
                servers_beside_workers=True)
    on = dict(pull_overlap=True, pull_window_bytes=512 * 1024, factor_broadcast=True,
              factor_value_bytes=2.0, worker_flop_s=1e-12, worker_apply_byte_s=1e-11)
    args = costmodel._parser().parse_args(flags)
    cl = costmodel.cluster_from_args(args, 8, 8)
    assert {k: getattr(cl, k) for k in on} == pytest.approx(on)
    # the defaults are today's behaviour: no overlap, ps-server's 2048 KiB window, float32
    plain = costmodel.cluster_from_args(costmodel._parser().parse_args(flags[:6]), 8, 8)
    assert (plain.pull_overlap, plain.pull_window_bytes, plain.factor_broadcast,
            plain.factor_value_bytes) == (False, 2048 * 1024, False, 4.0)
    # the factors' bytes follow the pushes' encoding as ps-worker sends them: 16-bit with
    # fp16 and bf16, float32 otherwise; --factor-bytes overrides
    for compression, expected in (("fp16", 2.0), ("bf16", 2.0), ("topk", 4.0), ("sign", 4.0)):
        got = costmodel.cluster_from_args(costmodel._parser().parse_args(
            flags[:6] + ["--compression", compression]), 8, 8)
        assert got.factor_value_bytes == expected, compression
    forced = costmodel._parser().parse_args(flags[:6] + ["--compression", "fp16",
                                                         "--factor-bytes", "4"])
    assert costmodel.cluster_from_args(forced, 8, 8).factor_value_bytes == 4.0
    want = predict(layers, params, 128, Cluster(**base, **on))
    assert code == 0 and line["iteration_ms"] == pytest.approx(want.iteration_s * 1e3)
    # the flags count: without the overlap, the rebuild, 16-bit factors or the broadcast
    for change in (dict(pull_overlap=False), dict(worker_flop_s=0.0),
                   dict(factor_value_bytes=4.0), dict(factor_broadcast=False)):
        other = predict(layers, params, 128, Cluster(**base, **dict(on, **change)))
        assert other.iteration_s != pytest.approx(want.iteration_s, rel=1e-6), change


def test_e13_holder_relays_from_a_shard_beside_take_the_gaps_of_the_hosts_pushes(monkeypatch):
    """Two hosts, a shard beside each, R pushed once, 100 MB/s links (E11', E13, E2e). conv
    (4 MB) is cut over both shards, fc (1000 x 1000, batch 64) too. Host 0's uplink carries
    this worker's pushes to shard 1: fc's factors 8-10.56 ms, conv's 2 MB 10.56-30.56 (shard
    0's go through memory). Holder shard 0 has R at 11.56 and relays it (256 KB) to host 1
    on the same uplink once the pushes leave it free: 30.56-33.12; on top of them
    (11.56-14.12) the link would carry twice its rate. Shard 1's relay leaves host 1's
    uplink the same way, once (not also behind shard 0's). The forwarder has R when the
    other host's conv push to shard 0 is in on host 0's downlink, 34.12; the replies after
    the steps end at 58.68."""
    calls = []
    share = costmodel._share

    def spy(jobs, bw, buckets, name, *args, **kwargs):
        spans = share(jobs, bw, buckets, name, *args, **kwargs)
        calls.append((name, [j[2] for j in jobs], spans))
        return spans
    monkeypatch.setattr(costmodel_iteration, "_share", spy)
    monkeypatch.setattr(costmodel_links, "_share", spy)   # _share_links' calls
    layers = [LayerTime("conv", 5.0, 1.0), LayerTime("fc", 2.0, 1.0)]
    params = [Param("conv", "conv/w", 1_000_000), Param("fc", "fc/w", 1000 * 1000, (1000, 1000))]
    cl = Cluster(workers=2, servers=2, servers_beside_workers=True, sufficient_factors=True,
                 factor_broadcast=True, factor_right="holder",
                 **dict(LINK, chunk_bytes=2_000_000))
    assert predict(layers, params, 64, cl).iteration_s == pytest.approx(0.05868)
    relays = [spans[0] for name, sizes, spans in calls if sizes == [256000.0] and
              name in ("up", ("out", 1))]
    assert relays[:2] == [pytest.approx((0.01156, 0.03312))] * 2
