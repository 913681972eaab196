#include "bench/process_memory.hpp"

#include <sys/resource.h>

#include <fstream>

namespace canopy::app {

bool reset_peak_rss() {
  // "5" resets the peak RSS that getrusage reports (Linux 4.0 and later).
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024; // Linux reports KiB
}

} // namespace canopy::app
