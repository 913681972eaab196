// See exception_text.hpp.
#include "exception_text.hpp"

#include <c10/util/Exception.h>

namespace canopy::actors {

std::string exception_text(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e))
    return torch_error->what_without_backtrace();
  return e.what();
}

} // namespace canopy::actors
