#include <canopy/server/server_options.hpp>

namespace canopy::server {

std::string server_url(const std::string& host, std::uint16_t port) {
  // A literal IPv6 address has colons of its own, so a URL brackets it (RFC 3986).
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::size_t connection_bytes_bound(const server_options& options) {
  // The session, its parser, strand and timers: 6 KiB a connection when 2,000 idle
  // ones were measured (glibc), so 16 KiB leaves room; socket buffers are the kernel's.
  constexpr std::size_t connection_state = 16u << 10;
  return options.max_header_bytes + read_chunk_bytes + connection_state;
}

std::size_t server_memory_bound(const server_options& options) {
  return options.answer_budget_bytes + options.body_budget_bytes +
         options.max_connections * connection_bytes_bound(options);
}

} // namespace canopy::server
