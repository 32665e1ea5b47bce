// Shared pieces of the transport tests: headers, payload vectors, receiving
// with a bounded wait, and a temporary folder for ipc sockets.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/transport/channel.hpp"

namespace pstrain::testing {

// A header of `type` from worker `sender` at `clock` listing `chunks` as (id, length).
Header MakeHeader(MessageType type, int sender, int64_t clock,
                  const std::vector<std::pair<uint32_t, uint64_t>>& chunks = {});

// A header of `type` from worker 0 of the job with key `job_key`.
Header WorkerZeroHeader(MessageType type, uint64_t job_key);

// An INIT_PUSH with `header` (its type set to INIT_PUSH) declaring one
// parameter `name` of shape {values.size()} in one chunk, id 0, carrying `values`.
transport::OutMessage OneChunkInitPush(Header header, const std::string& name,
                                       std::vector<float> values);

// n values start, start + 1, ... as a shared vector.
std::shared_ptr<const std::vector<float>> Ramp(size_t n, float start);

// The next message on `channel` within `timeout`; records a failure and returns
// an empty message when none (or an error) comes.
transport::InMessage MustReceive(transport::Channel& channel,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The next message on `channel` within `within`, polled every 200 ms; a
// failure records a type other than `type`. nullopt, with a failure, when
// none comes or Receive fails.
std::optional<transport::InMessage> ExpectMessage(transport::Channel& channel, MessageType type,
                                                  std::chrono::seconds within);

// Receive's result within `timeout`, expecting no message: true when none came.
bool NothingArrives(transport::Channel& channel, std::chrono::milliseconds timeout);

// True once `condition` holds, checked every 10 ms for at most `within` (for
// what other threads or processes do in their own time on a loaded machine).
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds within);

// A fresh folder under /tmp (short, for ipc paths), removed by the destructor.
class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pstrain::testing
