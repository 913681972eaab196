#pragma once
// The tile shapes a block kernel compiles (block_dot.hpp's block_dot_fn): r weight rows
// by n activation rows, r 1..4 with n 1..4, or 8 by 1 (a decoding pass: a whole group
// of weight rows against one activation row). dispatch_tile turns the run-time shape
// into a call of the compiled tile.
//
// Internal linkage on purpose: each kernel file is compiled for its own instruction
// set, and a shared inline copy could be the one the linker keeps, compiled for a CPU
// that the program may not be running on.
// Thread contract: pure functions.

#include <type_traits>

namespace canopy::backends {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

template <int R, class Tile> void dispatch_columns(int n, Tile&& tile) {
  using std::integral_constant;
  switch (n) {
  case 1:
    return tile(integral_constant<int, R>{}, integral_constant<int, 1>{});
  case 2:
    return tile(integral_constant<int, R>{}, integral_constant<int, 2>{});
  case 3:
    return tile(integral_constant<int, R>{}, integral_constant<int, 3>{});
  default:
    return tile(integral_constant<int, R>{}, integral_constant<int, 4>{});
  }
}

/// tile(integral_constant<int, R>, integral_constant<int, N>) for the shape r x n.
template <class Tile> void dispatch_tile(int r, int n, Tile&& tile) {
  switch (r) {
  case 1:
    return dispatch_columns<1>(n, tile);
  case 2:
    return dispatch_columns<2>(n, tile);
  case 3:
    return dispatch_columns<3>(n, tile);
  case 4:
    return dispatch_columns<4>(n, tile);
  default:
    return tile(std::integral_constant<int, 8>{}, std::integral_constant<int, 1>{});
  }
}

} // namespace
} // namespace canopy::backends
