#pragma once
// Bytes this process exchanged over TCP with given peers: the kernel's per-socket
// counters (TCP_INFO: bytes acknowledged by the peer, bytes received) summed over this
// process's sockets whose peer port is one of `peer_ports` on loopback. The bench reads
// it before and after a run to report the wire cost of remote workers: what crossed,
// CAF's own framing included.
// Thread contract: any thread (reads /proc/self/fd and socket options).

#include <cstdint>
#include <vector>

namespace canopy::app {

std::uint64_t tcp_bytes_with(const std::vector<std::uint16_t>& peer_ports);

} // namespace canopy::app
