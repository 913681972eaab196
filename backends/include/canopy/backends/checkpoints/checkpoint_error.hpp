#pragma once
// The one exception every checkpoint reader and writer throws for a bad file: its
// message names the file (and the tensor, where one is involved), so a user can act
// on it without a debugger.
// Thread contract: a plain value.

#include <stdexcept>

namespace canopy::backends {

class checkpoint_error : public std::runtime_error {
public:
  using runtime_error::runtime_error;
};

} // namespace canopy::backends
