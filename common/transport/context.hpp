// Context: the transport's process-wide state (ZeroMQ's context and its I/O
// thread). Make one per process (tests may make several) and keep it until
// every Channel made in it is destroyed. Thread-safe: channels for several
// threads may be made in one context, each then used by its own thread.
#pragma once

#include <memory>

namespace pstrain::transport {

class Context {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  friend class ContextAccess;  // channel.cpp: the ZeroMQ context inside
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain::transport
