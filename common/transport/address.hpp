// ZeroMQ endpoint addresses from the job's (kind, host, port).
#pragma once

#include <string>

#include "common/status.hpp"

namespace pstrain::transport {

// "tcp://1.2.3.4:5555", "ipc:///tmp/x.sock" or "inproc://name".
//   kind "tcp": host is an interface name ("lo", "eth0": its first IPv4
//     address), an IP address, a host name (resolved now with getaddrinfo,
//     IPv4 preferred) or "*" (every interface, bind only); port in [0, 65535],
//     0 = any free port when binding (Channel::endpoint() then tells which).
//   kind "ipc": host is a file path (at most 107 bytes); port is ignored.
//   kind "inproc": host is a name; port is ignored.
// Errors: "unknown transport 'x' (tcp, ipc or inproc)", "cannot resolve host
// 'x': <reason>", "port 70000 is outside [0, 65535]", an empty host or a too
// long ipc path.
Result<std::string> MakeAddress(const std::string& kind, const std::string& host, int port);

// True when only this machine can reach `address` (as MakeAddress makes it):
// tcp on 127.0.0.0/8 or [::1], ipc, inproc. "tcp://*:..." and every other
// interface are not: binding one without CURVE is refused (docs/security.md).
bool IsLoopback(const std::string& address);

}  // namespace pstrain::transport
