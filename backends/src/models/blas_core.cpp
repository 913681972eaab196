#include "models/blas_core.hpp"

#include <dlfcn.h>

namespace canopy::backends {

std::string blas_core() {
  using corename_fn = char*();
  auto* name =
      reinterpret_cast<corename_fn*>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return name != nullptr ? name() : "";
}

} // namespace canopy::backends
