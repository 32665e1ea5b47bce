#include "common/transport/address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <optional>

namespace pstrain::transport {
namespace {

std::string Numeric(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
    return text;
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
            sizeof(text));
  return std::string("[") + text + "]";
}

// The first IPv4 address of network interface `name`, if it is one.
std::optional<std::string> InterfaceAddress(const std::string& name) {
  if (if_nametoindex(name.c_str()) == 0) return std::nullopt;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET && name == a->ifa_name) {
      found = Numeric(a->ifa_addr);
    }
  }
  freeifaddrs(list);
  return found;
}

Result<std::string> ResolveHost(const std::string& host) {
  if (host == "*") return host;
  if (auto address = InterfaceAddress(host)) return *address;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    std::string message = "cannot resolve host '" + host + "': " + gai_strerror(rc);
    // EAI_AGAIN: the name server did not answer (may pass); anything else is final.
    if (rc == EAI_AGAIN) return Status::Unavailable(std::move(message));
    return Status::NotFound(std::move(message));
  }
  std::string chosen;
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      chosen = Numeric(a->ai_addr);
      break;
    }
    if (a->ai_family == AF_INET6 && chosen.empty()) chosen = Numeric(a->ai_addr);
  }
  freeaddrinfo(list);
  if (chosen.empty()) return Status::NotFound("cannot resolve host '" + host + "': no IP address");
  return chosen;
}

}  // namespace

Result<std::string> MakeAddress(const std::string& kind, const std::string& host, int port) {
  if (kind != "tcp" && kind != "ipc" && kind != "inproc") {
    return Status::InvalidArgument("unknown transport '" + kind + "' (tcp, ipc or inproc)");
  }
  if (host.empty()) return Status::InvalidArgument(kind + " address needs a host");
  if (kind == "inproc") return "inproc://" + host;
  if (kind == "ipc") {
    if (host.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return Status::InvalidArgument("ipc path '" + host + "' is longer than " +
                                     std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
    }
    return "ipc://" + host;
  }
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(port) + " is outside [0, 65535]");
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::string ip, ResolveHost(host));
  return "tcp://" + ip + ":" + (port == 0 ? std::string("*") : std::to_string(port));
}

bool IsLoopback(const std::string& address) {
  if (address.rfind("tcp://", 0) != 0) return true;
  const std::string host = address.substr(6, address.rfind(':') - 6);
  return host.rfind("127.", 0) == 0 || host == "[::1]";
}

}  // namespace pstrain::transport
