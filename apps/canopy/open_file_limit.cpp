#include "open_file_limit.hpp"

#include <algorithm>

#include <sys/resource.h>

namespace canopy::app {

std::size_t raise_open_file_limit(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return 0;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    auto raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY
                          ? static_cast<rlim_t>(wanted)
                          : std::min<rlim_t>(static_cast<rlim_t>(wanted), limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0)
      limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? wanted
                                         : static_cast<std::size_t>(limit.rlim_cur);
}

} // namespace canopy::app
