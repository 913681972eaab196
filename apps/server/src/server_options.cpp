#include <canopy/server/server_options.hpp>

namespace canopy::server {

std::string server_url(const std::string& host, std::uint16_t port) {
  // A literal IPv6 address has colons of its own, so a URL brackets it (RFC 3986).
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

} // namespace canopy::server
