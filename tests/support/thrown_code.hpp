#pragma once
// The error code a call throws, for tests of the embedding API's refusals.
// Thread contract: plain function.

#include <canopy/error.hpp>

#include <functional>

namespace canopy::testing {

/// The errc of the canopy::error `call` throws; errc::none when it returns.
inline errc code_of_call(const std::function<void()>& call) {
  try {
    call();
  } catch (const canopy::error& e) {
    return e.code();
  }
  return errc::none;
}

} // namespace canopy::testing
