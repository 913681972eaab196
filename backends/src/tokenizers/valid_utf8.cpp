#include <canopy/backends/tokenizers/valid_utf8.hpp>

#include "tokenizers/utf8.hpp"

namespace canopy::backends {

bool valid_utf8(std::string_view bytes) {
  for (std::size_t at = 0; at < bytes.size();)
    if (!utf8::next(bytes, at))
      return false;
  return true;
}

} // namespace canopy::backends
