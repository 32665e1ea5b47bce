// The parameter-server client from Python (worker/ps/ps_client.hpp): a net's
// learnable parameters (lr_mult != 0, as ps-worker holds them) connected to
// running ps-server shards. ps-lite's small API: hello, init_push (rank 0),
// pull / wait_pull before a forward, push after a backward, flush, shutdown;
// and for a driver (role="control": the orchestrator's client, no HELLO),
// set_gate / wait_for_clock (the step gate), stats, and pull: a control
// client's pull is answered at once with the shards' current weights.
// Waits release the GIL.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "common/transport/context.hpp"
#include "python/ext/bindings.hpp"
#include "worker/ps/ps_client.hpp"

namespace pstrain::python {
namespace {

struct PsClientHandle {
  std::unique_ptr<transport::Context> context;
  std::unique_ptr<PsClient> client;
  std::vector<int> all_params;
  ~PsClientHandle() {
    nb::gil_scoped_release release;  // the client's threads may need to finish
    client.reset();
    context.reset();
  }
};

template <typename F>
void Released(F&& work) {
  Status status;
  {
    nb::gil_scoped_release release;
    status = work();
  }
  ThrowIfError(status);
}

void MakeClient(PsClientHandle* self, NetHandle& net, const std::vector<std::string>& servers,
                int rank, int world_size, const std::string& mode, long long job_key,
                const std::string& keys, long long chunk_bytes, double timeout_s,
                const std::string& role) {
  if (servers.empty()) throw std::invalid_argument("PsClient: servers must name at least one");
  if (role != "worker" && role != "control") {
    throw std::invalid_argument("PsClient: role \"" + role + "\" is not worker or control");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("PsClient: rank " + std::to_string(rank) + " of " +
                                std::to_string(world_size) + " workers is out of range");
  }
  PsClientOptions options;
  options.servers = servers;
  options.role = role == "worker" ? pstrain::WORKER : pstrain::CONTROL;
  options.rank = rank;
  options.world_size = world_size;
  options.mode = ValueOrThrow(ParseConsistencyMode(mode));
  options.job_key = static_cast<uint64_t>(job_key);
  options.keys = keys;
  options.chunk_bytes = chunk_bytes;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  std::vector<PsParam> params;
  for (const auto& p : net.net->learnable_params()) {
    if (p.lr_mult == 0.f) continue;  // frozen parameters stay local, as in ps-worker
    params.push_back({p.name, p.blob, p.lr_mult, p.decay_mult});
  }
  auto* h = new (self) PsClientHandle();
  for (size_t i = 0; i < params.size(); ++i) h->all_params.push_back(static_cast<int>(i));
  h->context = std::make_unique<transport::Context>();
  Result<std::unique_ptr<PsClient>> client = [&] {
    nb::gil_scoped_release release;
    return PsClient::Connect(*h->context, options, std::move(params));
  }();
  h->client = ValueOrThrow(std::move(client));
}

}  // namespace

void BindPsClient(nb::module_& m) {
  nb::class_<PsClientHandle>(m, "PsClient",
                             "A net's parameters connected to running ps-server shards.")
      .def("__init__", &MakeClient, nb::arg("net"), nb::arg("servers"), nb::arg("rank") = 0,
           nb::arg("world_size") = 1, nb::arg("mode") = "bsp", nb::arg("job_key") = 0,
           nb::arg("keys") = "", nb::arg("chunk_bytes") = 1 << 20, nb::arg("timeout_s") = 120.0,
           nb::arg("role") = "worker", nb::keep_alive<1, 2>())
      .def(
          "hello",
          [](PsClientHandle& h) {
            int64_t clock = 0;
            Released([&] { return h.client->Hello(&clock); });
            return clock;
          },
          "Greets every shard; returns this worker's clock there (0 for a fresh job).")
      .def(
          "init_push", [](PsClientHandle& h) { Released([&] { return h.client->InitPush(); }); },
          "Rank 0: the parameters' shapes and current values become the shards' first values.")
      .def("pull", [](PsClientHandle& h,
                      long long clock) { Released([&] { return h.client->Pull(clock); }); })
      .def(
          "wait_pull",
          [](PsClientHandle& h) {
            int64_t version = 0;
            std::vector<std::string> files;
            Released([&] { return h.client->WaitPull(&version, &files); });
            return version;
          },
          "Waits until the pulled weights are in the net's blobs; returns the shards' version.")
      .def(
          "push",
          [](PsClientHandle& h, long long clock) {
            Released([&] { return h.client->Push(h.all_params, clock, -1.0); });
          },
          "Pushes every parameter's gradient (the blobs' diffs) for iteration `clock`; the "
          "diffs must stay unchanged until the next wait_pull or flush.")
      .def("flush", [](PsClientHandle& h) { Released([&] { return h.client->Flush(); }); })
      .def("shutdown", [](PsClientHandle& h) { Released([&] { return h.client->Shutdown(); }); })
      .def(
          "set_gate",
          [](PsClientHandle& h, long long gate, bool checkpoint) {
            Result<GateState> state = GateState{};
            {
              nb::gil_scoped_release release;
              state = h.client->SetGate(gate, checkpoint);
            }
            const GateState g = ValueOrThrow(std::move(state));
            return std::make_pair(g.slowest_clock, g.version);
          },
          nb::arg("gate"), nb::arg("checkpoint") = false,
          "Driver: opens every shard's step gate (ps-server --step-gate) to `gate`: workers may "
          "compute iterations < gate. checkpoint: also cut a checkpoint at iteration `gate` "
          "(written once the gate rises above it). Returns (slowest worker clock, version), the "
          "smallest over the shards.")
      .def(
          "wait_for_clock",
          [](PsClientHandle& h, long long clock, double timeout_s) {
            Result<GateState> state = GateState{};
            {
              nb::gil_scoped_release release;
              state = h.client->WaitForClock(
                  clock, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
            }
            const GateState g = ValueOrThrow(std::move(state));
            return std::make_pair(g.slowest_clock, g.version);
          },
          nb::arg("clock"), nb::arg("timeout_s") = 120.0,
          "Driver: waits until every worker's clock is >= `clock` on every shard (their pushes of "
          "the iterations before it are in); returns (slowest worker clock, version).")
      .def(
          "stats",
          [](PsClientHandle& h) {
            Result<std::vector<pstrain::ShardStats>> stats = std::vector<pstrain::ShardStats>{};
            {
              nb::gil_scoped_release release;
              stats = h.client->Stats();
            }
            nb::list shards;
            for (const pstrain::ShardStats& s : ValueOrThrow(std::move(stats))) {
              nb::dict d;
              d["version"] = s.version();
              d["pushes_applied"] = s.pushes_applied();
              d["staleness_max"] = s.staleness_max();
              d["staleness_histogram"] = std::vector<int64_t>(s.staleness_histogram().begin(),
                                                              s.staleness_histogram().end());
              d["worker_clocks"] =
                  std::vector<int64_t>(s.worker_clocks().begin(), s.worker_clocks().end());
              d["bytes_received"] = s.bytes_received();
              d["bytes_sent"] = s.bytes_sent();
              d["bad_messages"] = s.bad_messages();
              shards.append(d);
            }
            return shards;
          },
          "Every shard's statistics (STATS), in shard order: version, pushes_applied, "
          "staleness_max, staleness_histogram ([k]: gradients applied k steps stale), "
          "worker_clocks, bytes_received, bytes_sent, bad_messages.")
      .def_prop_ro("traffic", [](const PsClientHandle& h) {
        const PsTraffic& t = h.client->traffic();
        nb::dict d;
        d["bytes_sent"] = t.bytes_sent;
        d["bytes_received"] = t.bytes_received;
        d["pull_wait_seconds"] = t.pull_wait_seconds;
        d["push_wait_seconds"] = t.push_wait_seconds;
        return d;
      });
}

}  // namespace pstrain::python
