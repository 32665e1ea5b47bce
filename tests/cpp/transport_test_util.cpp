#include "tests/cpp/transport_test_util.hpp"

#include <stdlib.h>

#include <filesystem>
#include <thread>

namespace pstrain::testing {

Header MakeHeader(MessageType type, int sender, int64_t clock,
                  const std::vector<std::pair<uint32_t, uint64_t>>& chunks) {
  Header h;
  h.set_type(type);
  h.set_role(WORKER);
  h.set_sender(sender);
  h.set_clock(clock);
  for (const auto& [id, length] : chunks) {
    ChunkRef* ref = h.add_chunks();
    ref->set_id(id);
    ref->set_length(length);
  }
  return h;
}

Header WorkerZeroHeader(MessageType type, uint64_t job_key) {
  Header h;
  h.set_type(type);
  h.set_role(WORKER);
  h.set_sender(0);
  h.set_job_key(job_key);
  return h;
}

transport::OutMessage OneChunkInitPush(Header header, const std::string& name,
                                       std::vector<float> values) {
  header.set_type(INIT_PUSH);
  ParamMeta* meta = header.add_params();
  meta->set_name(name);
  meta->add_shape(static_cast<int64_t>(values.size()));
  ChunkRef* ref = header.add_chunks();
  ref->set_id(0);
  ref->set_length(values.size());
  transport::OutMessage init{std::move(header), {}};
  init.payloads.push_back(
      transport::Payload::Of(std::make_shared<std::vector<float>>(std::move(values))));
  return init;
}

std::shared_ptr<const std::vector<float>> Ramp(size_t n, float start) {
  auto values = std::make_shared<std::vector<float>>(n);
  for (size_t i = 0; i < n; ++i) (*values)[i] = start + static_cast<float>(i);
  return values;
}

transport::InMessage MustReceive(transport::Channel& channel, std::chrono::milliseconds timeout) {
  auto received = channel.Receive(timeout);
  if (!received.ok()) {
    ADD_FAILURE() << received.status().message();
    return {};
  }
  if (!received.value().has_value()) {
    ADD_FAILURE() << channel.endpoint() << ": no message within " << timeout.count() << " ms";
    return {};
  }
  return std::move(*received.value());
}

std::optional<transport::InMessage> ExpectMessage(transport::Channel& channel, MessageType type,
                                                  std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    auto got = channel.Receive(std::chrono::milliseconds(200));
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return std::nullopt;
    if (got.value().has_value()) {
      EXPECT_EQ(got.value()->header.type(), type) << got.value()->header.ShortDebugString();
      return std::move(got.value());
    }
  }
  ADD_FAILURE() << "no " << MessageType_Name(type) << " within " << within.count() << " s";
  return std::nullopt;
}

bool NothingArrives(transport::Channel& channel, std::chrono::milliseconds timeout) {
  auto received = channel.Receive(timeout);
  return received.ok() && !received.value().has_value();
}

bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TempFolder::TempFolder() {
  char name[] = "/tmp/pstrain_transport_XXXXXX";
  if (mkdtemp(name) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  path_ = name;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace pstrain::testing
