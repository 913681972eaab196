#include "bench/socket_traffic.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace canopy::app {

std::uint64_t tcp_bytes_with(const std::vector<std::uint16_t>& peer_ports) {
  std::uint64_t total = 0;
  // opendir, not std::filesystem::directory_iterator: pip's CUDA LibTorch before 2.9
  // exports a static copy of the latter that clashes with libstdc++'s (pytorch#133437).
  const std::unique_ptr<DIR, int (*)(DIR*)> fds(::opendir("/proc/self/fd"), ::closedir);
  if (!fds)
    return 0;
  while (const dirent* entry = ::readdir(fds.get())) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0')
      continue; // "." and ".."
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer),
                      &length) != 0 ||
        peer.sin_family != AF_INET)
      continue;
    if (std::find(peer_ports.begin(), peer_ports.end(), ntohs(peer.sin_port)) ==
        peer_ports.end())
      continue;
    tcp_info info{};
    socklen_t size = sizeof info;
    if (::getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &info, &size) == 0)
      total += info.tcpi_bytes_acked + info.tcpi_bytes_received;
  }
  return total;
}

} // namespace canopy::app
