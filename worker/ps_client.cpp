#include "worker/ps_client.hpp"

#include <algorithm>
#include <cstring>

namespace pstrain {

using transport::InMessage;
using transport::OutMessage;
using transport::Payload;
using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<PsClient>> PsClient::Connect(zmq::context_t& context,
                                                    const PsClientOptions& options,
                                                    std::vector<PsParam> params) {
  if (options.servers.empty()) return Status::Error("no parameter servers given");
  std::unique_ptr<PsClient> client(new PsClient());
  client->options_ = options;
  client->params_ = std::move(params);
  std::vector<int64_t> sizes;
  for (const auto& p : client->params_) sizes.push_back(p.blob->count());
  PSTRAIN_ASSIGN_OR_RETURN(
      client->placement_,
      KeyPlacement::Create(sizes, static_cast<int>(options.servers.size()), options.chunk_bytes));
  transport::SocketOptions socket_options;
  socket_options.identity = "worker-" + std::to_string(options.rank);
  for (size_t k = 0; k < options.servers.size(); ++k) {
    PSTRAIN_ASSIGN_OR_RETURN(auto channel,
                             transport::ConnectDealer(context, options.servers[k], socket_options));
    client->channel_ptrs_.push_back(channel.get());
    client->channels_.push_back(std::move(channel));
    client->shard_has_chunks_.push_back(!client->placement_.shard_chunks(k).empty());
  }
  client->in_flight_.assign(options.servers.size(), 0);
  return client;
}

PsClient::~PsClient() = default;

pstrain::Header PsClient::NewHeader(pstrain::MessageType type) const {
  pstrain::Header h;
  h.set_type(type);
  h.set_role(pstrain::WORKER);
  h.set_sender(options_.rank);
  h.set_job_key(options_.job_key);
  return h;
}

Status PsClient::Send(int shard, OutMessage message) {
  message.header.set_request_id(next_request_++);
  int64_t bytes = static_cast<int64_t>(message.header.ByteSizeLong());
  for (const auto& p : message.payloads) bytes += static_cast<int64_t>(p.bytes());
  Status s = channels_[shard]->Send("", std::move(message));
  if (!s.ok()) return s.WithContext("server " + std::to_string(shard));
  traffic_.bytes_sent += bytes;
  return Status::Ok();
}

Result<std::optional<std::pair<int, InMessage>>> PsClient::ReceiveOne(
    std::chrono::milliseconds timeout) {
  PSTRAIN_ASSIGN_OR_RETURN(int ready, transport::PollAny(channel_ptrs_, timeout));
  if (ready < 0) return std::optional<std::pair<int, InMessage>>();
  auto received = channels_[ready]->Receive(std::chrono::milliseconds(0));
  if (!received.ok()) return received.status().WithContext("server " + std::to_string(ready));
  if (!received.value().has_value()) return std::optional<std::pair<int, InMessage>>();
  InMessage message = std::move(*received.value());
  traffic_.bytes_received += static_cast<int64_t>(message.bytes());
  const auto type = message.header.type();
  if (type == pstrain::ERROR) {
    return Status::Error("server " + std::to_string(ready) + " refused a request: " +
                         message.header.text());
  }
  if (type == pstrain::PUSH_ACK) {
    in_flight_[ready] = std::max(0, in_flight_[ready] - 1);
  }
  if (type == pstrain::PULL_REPLY) PSTRAIN_RETURN_IF_ERROR(AcceptPullReply(ready, message));
  return std::optional<std::pair<int, InMessage>>(std::make_pair(ready, std::move(message)));
}

Status PsClient::AwaitFromShards(pstrain::MessageType type, std::vector<bool> waiting,
                                 std::vector<InMessage>* replies) {
  if (replies) replies->resize(channels_.size());
  auto last_heard = Clock::now();
  while (std::find(waiting.begin(), waiting.end(), true) != waiting.end()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (!got.has_value()) {
      if (Clock::now() - last_heard > options_.timeout) {
        std::string who;
        for (size_t k = 0; k < waiting.size(); ++k) {
          if (waiting[k]) who += (who.empty() ? "" : ", ") + options_.servers[k];
        }
        return Status::DeadlineExceeded("no answer from server(s) " + who + " for " +
                                        std::to_string(options_.timeout.count() / 1000) + " s");
      }
      continue;
    }
    last_heard = Clock::now();
    auto& [shard, message] = *got;
    if (message.header.type() == type && waiting[shard]) {
      waiting[shard] = false;
      if (replies) (*replies)[shard] = std::move(message);
    }
  }
  return Status::Ok();
}

Status PsClient::Hello(int64_t* clock) {
  for (size_t k = 0; k < channels_.size(); ++k) {
    OutMessage m{NewHeader(pstrain::HELLO), {}};
    m.header.set_world_size(options_.world_size);
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m)));
  }
  std::vector<InMessage> replies;
  PSTRAIN_RETURN_IF_ERROR(
      AwaitFromShards(pstrain::HELLO_ACK, std::vector<bool>(channels_.size(), true), &replies));
  int64_t smallest = INT64_MAX;
  for (size_t k = 0; k < replies.size(); ++k) {
    if (shard_has_chunks_[k]) smallest = std::min(smallest, replies[k].header.clock());
  }
  *clock = smallest == INT64_MAX ? 0 : smallest;
  return Status::Ok();
}

Status PsClient::InitPush() {
  std::vector<bool> waiting(channels_.size(), false);
  for (size_t k = 0; k < channels_.size(); ++k) {
    OutMessage m{NewHeader(pstrain::INIT_PUSH), {}};
    for (const auto& p : params_) {
      pstrain::ParamMeta* meta = m.header.add_params();
      meta->set_name(p.name);
      for (int d : p.blob->shape()) meta->add_shape(d);
      meta->set_lr_mult(p.lr_mult);
      meta->set_decay_mult(p.decay_mult);
    }
    for (uint32_t id : placement_.shard_chunks(static_cast<int>(k))) {
      const Chunk& c = placement_.chunk(id);
      auto values = StagingBuffer(c.length);
      std::memcpy(values->data(), params_[c.param].blob->cpu_data() + c.offset,
                  c.length * sizeof(float));
      pstrain::ChunkRef* ref = m.header.add_chunks();
      ref->set_id(id);
      ref->set_length(c.length);
      m.payloads.push_back(Payload::Slice(values, 0, c.length));
    }
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m)));
    waiting[k] = true;
  }
  return AwaitFromShards(pstrain::INIT_ACK, waiting, nullptr);
}

Status PsClient::Pull(int64_t clock) {
  if (pull_outstanding_) return Status::Error("a pull is already outstanding");
  pull_arrived_.assign(placement_.chunks().size(), 0);
  pull_missing_.assign(channels_.size(), 0);
  pull_version_.assign(channels_.size(), INT64_MIN);
  pull_files_.assign(channels_.size(), "");
  for (size_t k = 0; k < channels_.size(); ++k) {
    if (!shard_has_chunks_[k]) continue;
    pull_missing_[k] = static_cast<int64_t>(placement_.shard_chunks(static_cast<int>(k)).size());
    OutMessage m{NewHeader(pstrain::PULL), {}};
    m.header.set_clock(clock);
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(m)));
  }
  pull_clock_ = clock;
  pull_outstanding_ = true;
  return Status::Ok();
}

Status PsClient::AcceptPullReply(int shard, const InMessage& reply) {
  const std::string server = "server " + std::to_string(shard);
  const size_t k = static_cast<size_t>(shard);
  if (!pull_outstanding_ || !shard_has_chunks_[k]) {
    return Status::Error(server + " sent a pull reply that no pull asked for");
  }
  if (reply.header.clock() != pull_clock_) {
    return Status::Error(server + " answered a pull for iteration " +
                         std::to_string(reply.header.clock()) + ", expected " +
                         std::to_string(pull_clock_));
  }
  const auto& expected = placement_.shard_chunks(shard);
  if (reply.header.has_reply_chunks_total() &&
      reply.header.reply_chunks_total() != expected.size()) {
    return Status::Error(server + " answers with " +
                         std::to_string(reply.header.reply_chunks_total()) +
                         " chunks in all, expected " + std::to_string(expected.size()));
  }
  if (reply.header.chunks_size() > pull_missing_[k] ||
      reply.payload_count() != static_cast<size_t>(reply.header.chunks_size())) {
    return Status::Error(server + " sent " + std::to_string(reply.header.chunks_size()) +
                         " chunks, expected at most " + std::to_string(pull_missing_[k]));
  }
  for (int i = 0; i < reply.header.chunks_size(); ++i) {
    const uint32_t id = reply.header.chunks(i).id();
    if (id >= placement_.chunks().size() || placement_.chunk(id).shard != shard ||
        reply.payload_length(i) != static_cast<size_t>(placement_.chunk(id).length) ||
        pull_arrived_[id]) {
      return Status::Error(server + " sent a bad chunk " + std::to_string(id));
    }
    pull_arrived_[id] = 1;
    const Chunk& c = placement_.chunk(id);
    std::memcpy(params_[c.param].blob->mutable_cpu_data() + c.offset, reply.payload(i),
                c.length * sizeof(float));
  }
  pull_missing_[k] -= reply.header.chunks_size();
  pull_version_[k] = std::max(pull_version_[k], reply.header.version());
  if (!reply.header.text().empty()) pull_files_[k] = reply.header.text();
  return Status::Ok();
}

Status PsClient::WaitPull(int64_t* version, std::vector<std::string>* checkpoint_files) {
  if (!pull_outstanding_) return Status::Error("WaitPull without a Pull");
  const auto start = Clock::now();
  auto last_heard = start;
  auto missing = [&] {
    return std::any_of(pull_missing_.begin(), pull_missing_.end(), [](int64_t n) { return n > 0; });
  };
  while (missing()) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (got.has_value()) {
      last_heard = Clock::now();
      continue;
    }
    if (Clock::now() - last_heard > options_.timeout) {
      std::string who;
      for (size_t k = 0; k < pull_missing_.size(); ++k) {
        if (pull_missing_[k] > 0) who += (who.empty() ? "" : ", ") + options_.servers[k];
      }
      return Status::DeadlineExceeded("no answer from server(s) " + who + " for " +
                                      std::to_string(options_.timeout.count() / 1000) + " s");
    }
  }
  pull_outstanding_ = false;
  int64_t smallest = INT64_MAX;
  for (size_t k = 0; k < pull_version_.size(); ++k) {
    if (shard_has_chunks_[k]) smallest = std::min(smallest, pull_version_[k]);
  }
  *version = smallest == INT64_MAX ? 0 : smallest;
  if (checkpoint_files) {
    checkpoint_files->clear();
    for (const std::string& file : pull_files_) {  // in shard order
      if (!file.empty()) checkpoint_files->push_back(file);
    }
  }
  traffic_.pull_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

std::shared_ptr<std::vector<float>> PsClient::StagingBuffer(size_t count) {
  for (auto& buffer : pool_) {
    if (buffer.use_count() == 1 && buffer->size() >= count) return buffer;
  }
  pool_.push_back(std::make_shared<std::vector<float>>(count));
  return pool_.back();
}

Status PsClient::Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares) {
  return Push(param_ids, clock, sum_squares, {});
}

Status PsClient::Push(const std::vector<int>& param_ids, int64_t clock, double sum_squares,
                      const std::vector<const float*>& diffs) {
  PSTRAIN_CHECK(diffs.empty() || diffs.size() == param_ids.size());
  std::vector<OutMessage> messages(channels_.size());
  for (size_t i = 0; i < param_ids.size(); ++i) {
    const int p = param_ids[i];
    const float* diff = diffs.empty() ? params_[p].blob->cpu_diff() : diffs[i];
    for (uint32_t id : placement_.param_chunks(p)) {
      const Chunk& c = placement_.chunk(id);
      auto values = StagingBuffer(c.length);
      std::memcpy(values->data(), diff + c.offset, c.length * sizeof(float));
      pstrain::ChunkRef* ref = messages[c.shard].header.add_chunks();
      ref->set_id(id);
      ref->set_length(c.length);
      messages[c.shard].payloads.push_back(Payload::Slice(values, 0, c.length));
    }
  }
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k].payloads.empty()) continue;
    const auto start = Clock::now();
    while (in_flight_[k] >= options_.max_pushes_in_flight) {
      PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
      if (!got.has_value() && Clock::now() - start > options_.timeout) {
        return Status::DeadlineExceeded("server " + options_.servers[k] +
                                        " acknowledged no push for " +
                                        std::to_string(options_.timeout.count() / 1000) + " s");
      }
      // Pull replies that arrive meanwhile are copied in by ReceiveOne.
    }
    traffic_.push_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    pstrain::Header header = NewHeader(pstrain::PUSH);
    header.set_clock(clock);
    if (sum_squares >= 0) header.set_sum_squares(sum_squares);
    for (const auto& ref : messages[k].header.chunks()) *header.add_chunks() = ref;
    messages[k].header = header;
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), std::move(messages[k])));
    ++in_flight_[k];
  }
  return Status::Ok();
}

Status PsClient::Flush() {
  const auto start = Clock::now();
  while (std::any_of(in_flight_.begin(), in_flight_.end(), [](int n) { return n > 0; })) {
    PSTRAIN_ASSIGN_OR_RETURN(auto got, ReceiveOne(std::chrono::milliseconds(200)));
    if (!got.has_value() && Clock::now() - start > options_.timeout) {
      return Status::DeadlineExceeded("pushes were not acknowledged within " +
                                      std::to_string(options_.timeout.count() / 1000) + " s");
    }
  }
  return Status::Ok();
}

Status PsClient::Shutdown() {
  for (size_t k = 0; k < channels_.size(); ++k) {
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), OutMessage{NewHeader(pstrain::SHUTDOWN), {}}));
  }
  // Wait for the acknowledgements: closing with linger 0 would drop the requests.
  const auto saved = options_.timeout;
  options_.timeout = std::chrono::milliseconds(5000);
  Status s = AwaitFromShards(pstrain::SHUTDOWN, std::vector<bool>(channels_.size(), true), nullptr);
  options_.timeout = saved;
  return s;
}

Result<std::vector<pstrain::ShardStats>> PsClient::Stats() {
  for (size_t k = 0; k < channels_.size(); ++k) {
    PSTRAIN_RETURN_IF_ERROR(Send(static_cast<int>(k), OutMessage{NewHeader(pstrain::STATS), {}}));
  }
  std::vector<InMessage> replies;
  PSTRAIN_RETURN_IF_ERROR(
      AwaitFromShards(pstrain::STATS, std::vector<bool>(channels_.size(), true), &replies));
  std::vector<pstrain::ShardStats> stats;
  for (const auto& r : replies) stats.push_back(r.header.stats());
  return stats;
}

}  // namespace pstrain
