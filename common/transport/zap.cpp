#include "common/transport/zap.hpp"

#include <zmq.h>

#include <cerrno>
#include <utility>

namespace pstrain::transport {

Result<std::unique_ptr<ZapHandler>> ZapHandler::Start(void* zmq_context,
                                                      std::map<std::string, std::string> admitted) {
  void* socket = zmq_socket(zmq_context, ZMQ_REP);
  if (socket == nullptr) {
    return Status::IOError(std::string("ZAP handler: cannot create a socket: ") +
                           zmq_strerror(zmq_errno()));
  }
  int linger = 0;
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
  if (zmq_bind(socket, "inproc://zeromq.zap.01") != 0) {
    const int err = zmq_errno();
    zmq_close(socket);
    return Status::IOError(std::string("ZAP handler: cannot bind inproc://zeromq.zap.01: ") +
                           zmq_strerror(err));
  }
  std::unique_ptr<ZapHandler> handler(new ZapHandler(socket, std::move(admitted)));
  handler->thread_ = std::thread([raw = handler.get()] { raw->Loop(); });
  return handler;
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  zmq_close(socket_);
}

std::vector<std::string> ZapHandler::TakeRefusals(int64_t* count) {
  std::lock_guard<std::mutex> lock(mutex_);
  *count = refused_;
  refused_ = 0;
  return std::exchange(refusals_, {});
}

void ZapHandler::Loop() {
  while (!stop_.load()) {
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 100) <= 0) continue;  // timeout, EINTR or a terminated context
    std::vector<std::string> frames;
    int more = 1;
    while (more) {
      zmq_msg_t part;
      zmq_msg_init(&part);
      if (zmq_msg_recv(&part, socket_, 0) < 0) {
        zmq_msg_close(&part);
        return;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&part)), zmq_msg_size(&part));
      more = zmq_msg_more(&part);
      zmq_msg_close(&part);
    }
    Answer(frames);
  }
}

// A request (RFC 27): version, request id, domain, address, routing id,
// mechanism, then the mechanism's credentials (CURVE: the client's 32-byte
// public key). The reply: version, request id, status code, status text,
// user id, metadata.
void ZapHandler::Answer(const std::vector<std::string>& request) {
  const std::string request_id = request.size() > 1 ? request[1] : "";
  std::string code = "400", text = "not a CURVE client of this job", user;
  std::string why;
  if (request.size() >= 7 && request[0] == "1.0" && request[5] == "CURVE" &&
      request[6].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(request[6].data()), 32);
    auto it = admitted_.find(z85);
    if (it != admitted_.end()) {
      code = "200";
      text = "OK";
      user = it->second;
    } else {
      why = "key " + std::string(z85, 8) + "... is not one of this job's";
    }
  } else {
    why = "mechanism " + (request.size() > 5 ? request[5] : std::string("?")) + " is not CURVE";
  }
  if (code != "200") {
    std::lock_guard<std::mutex> lock(mutex_);
    ++refused_;
    if (refusals_.size() < kMaxPending) {
      const std::string address = request.size() > 3 ? request[3] : "?";
      refusals_.push_back("refused a connection from " + address + ": " + why);
    }
  }
  const std::string reply[] = {"1.0", request_id, code, text, user, ""};
  for (size_t i = 0; i < 6; ++i) {
    zmq_send(socket_, reply[i].data(), reply[i].size(), i + 1 < 6 ? ZMQ_SNDMORE : 0);
  }
}

}  // namespace pstrain::transport
