// HostGroup: the workers of one bsp job that share a host, pushing once
// (transport.host_aggregation, docs/user-guide.md "One push per host").
//
// The group's lowest rank is its leader: the only one of them that talks to
// the servers, as one pusher among the job's groups (ps-server --workers G
// --average-over W). Per iteration t:
//   a member  copies its gradients into its slot of the group's shared memory
//             and stamps the slot t (PublishGradient), then waits for the
//             weights of t+1 there (ReadWeights);
//   the leader waits for every member's stamp t, adds the members' slots to
//             its own gradients in rank order (SumGradients: ((g_L + g_a) + g_b),
//             as the shard sums workers, so a group holding every worker pushes
//             the very floats the shard would have summed), pushes that sum,
//             pulls t+1 and copies the weights into the shared memory
//             (PublishWeights).
// The shard averages over the W workers, not the G pushes, so bsp stays equal
// to one worker with batch W*B.
//
// Shared memory: one POSIX segment per group (shm_open, the name given by the
// orchestrator: it holds the run's random job number), mode 0600 and owned by
// this user, else refused: another local user can neither read nor plant it.
// Joining: a member that starts (or restarts) asks the leader for the current
// weights (Join) and trains from their iteration; the leader answers whenever
// it waits for gradients, after clearing the member's old slot stamp. Every
// wait is bounded by `timeout` and ends in an error naming the worker it
// waited for, so a dead member or leader never hangs the others for ever
// (ps-train restarts the one that exits).
// Waits sleep on futexes in the segment (process-shared), woken by the other
// side's stores. Used by one thread of each process.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/blob.hpp"
#include "common/status.hpp"

namespace pstrain {

struct HostGroupOptions {
  std::string name;        // the shared-memory segment, "/pstrain-..." ("": no group)
  std::vector<int> ranks;  // the group's workers, ascending; ranks[0] leads
  int rank = 0;            // this worker's rank, one of `ranks`
  int world_size = 0;      // the job's workers (W; the client's world_size counts groups)
  std::chrono::milliseconds timeout{120000};
};

class HostGroup {
 public:
  // Opens (or creates) the group's segment for parameters of `values` floats
  // in all. Error: a bad name or rank, a segment of another user, other
  // permissions or another shape (FailedPrecondition, InvalidArgument).
  static Result<std::unique_ptr<HostGroup>> Open(const HostGroupOptions& options, int64_t values);
  HostGroup(const HostGroup&) = delete;
  HostGroup& operator=(const HostGroup&) = delete;
  ~HostGroup();

  bool leader() const { return slot_ < 0; }
  const HostGroupOptions& options() const { return options_; }

  // Member: waits until the leader answered this start; `iter` receives the
  // iteration of the weights now in the segment (train from there).
  Status Join(int64_t* iter);
  // Member: waits for the weights of iteration `iter` and copies them into the
  // blobs' host data (in order, `values` floats in all); `version` receives
  // the servers' version of them. Error: the leader published a later
  // iteration (it restarted past this one: restart and Join).
  Status ReadWeights(int64_t iter, const std::vector<Blob*>& blobs, int64_t* version);
  // Member: the blobs' host diffs as its gradient of iteration `iter`.
  Status PublishGradient(int64_t iter, const std::vector<Blob*>& blobs);

  // Leader: the blobs' host data as the weights of iteration `iter`.
  Status PublishWeights(int64_t iter, int64_t version, const std::vector<Blob*>& blobs);
  // Leader: waits for every member's gradient of `iter` (answering joins
  // meanwhile) and adds them, in rank order, to the blobs' host diffs.
  Status SumGradients(int64_t iter, const std::vector<Blob*>& blobs);

  // Leader, at the end of a job that finished: removes the segment's name
  // (mappings stay valid; a restarted member would find a fresh segment).
  void Unlink();

  struct Header;  // host_group.cpp: the segment's control words

 private:
  HostGroup() = default;
  // Futex wait on `word` while it holds `seen`, at most until `deadline`.
  void Sleep(std::atomic<uint32_t>* word, uint32_t seen,
             std::chrono::steady_clock::time_point deadline) const;
  void Wake(std::atomic<uint32_t>* word) const;
  // Leader: answers the members whose join requests are open.
  void AnswerJoins();
  float* slot_data(int member) const;
  float* weights_data() const;

  HostGroupOptions options_;
  int slot_ = -1;  // this member's slot (0-based among the members); -1: the leader
  int64_t values_ = 0;
  size_t bytes_ = 0;
  void* base_ = nullptr;  // the mapping
  Header* header_ = nullptr;
};

}  // namespace pstrain
