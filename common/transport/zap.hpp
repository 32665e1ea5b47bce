// ZapHandler: the ZeroMQ authentication (ZAP, RFC 27) handler of one
// Context: a thread answering inproc://zeromq.zap.01, admitting a CURVE
// client when its public key is one of the job's and naming the connection
// after it (the "User-Id" every message from it carries). Every other key is
// refused. Internal to common/transport (Context::AdmitKeys starts one).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.hpp"

namespace pstrain::transport {

class ZapHandler {
 public:
  // Binds the ZAP endpoint in `zmq_context` (a ZeroMQ context, opaque here)
  // and starts the thread. `admitted`: Z85 public key -> peer name.
  // Error: the endpoint is taken (a handler already runs in this context).
  static Result<std::unique_ptr<ZapHandler>> Start(void* zmq_context,
                                                   std::map<std::string, std::string> admitted);
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;
  // Stops and joins the thread, closes its socket. REQUIRES: before the
  // context is terminated.
  ~ZapHandler();

  // Descriptions of the connections refused since the last call
  // ("tcp peer 127.0.0.1: key jTKd...(8 characters) is not one of this job's"), at most
  // kMaxPending of them; `*count` receives how many were refused in all since then.
  std::vector<std::string> TakeRefusals(int64_t* count);
  static constexpr size_t kMaxPending = 64;

 private:
  ZapHandler(void* socket, std::map<std::string, std::string> admitted)
      : socket_(socket), admitted_(std::move(admitted)) {}
  void Loop();
  void Answer(const std::vector<std::string>& request);

  void* socket_;  // REP, used by the thread only once started
  const std::map<std::string, std::string> admitted_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;  // guards refusals_ and refused_
  std::vector<std::string> refusals_;
  int64_t refused_ = 0;
};

}  // namespace pstrain::transport
