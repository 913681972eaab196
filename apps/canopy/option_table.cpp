#include "option_table.hpp"

namespace canopy::app {

std::string bytes_text(std::uint64_t bytes) {
  for (const auto& [unit, name] :
       {std::pair<std::uint64_t, const char*>{1ull << 30, "GiB"},
        {1ull << 20, "MiB"},
        {1ull << 10, "KiB"}})
    if (bytes >= unit && bytes % unit == 0)
      return std::to_string(bytes / unit) + " " + name;
  return std::to_string(bytes);
}

} // namespace canopy::app
