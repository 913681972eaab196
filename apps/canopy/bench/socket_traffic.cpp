#include "bench/socket_traffic.hpp"

#include <algorithm>
#include <filesystem>
#include <string>

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace canopy::app {

std::uint64_t tcp_bytes_with(const std::vector<std::uint16_t>& peer_ports) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (...) {
      continue;
    }
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 ||
        peer.sin_family != AF_INET)
      continue;
    if (std::find(peer_ports.begin(), peer_ports.end(), ntohs(peer.sin_port)) == peer_ports.end())
      continue;
    tcp_info info{};
    socklen_t size = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) == 0)
      total += info.tcpi_bytes_acked + info.tcpi_bytes_received;
  }
  return total;
}

} // namespace canopy::app
