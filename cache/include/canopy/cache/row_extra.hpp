#pragma once
// Something computed once from a stored row and kept beside it in the trie (the
// next-byte masses of issue 30), so that a repeated use of the row does not compute it
// again. It is charged to the log-prob budget with its row and dropped with it.
// Thread contract: immutable once built; share freely through row_extra_ptr.

#include <cstddef>
#include <memory>

namespace canopy::cache {

class row_extra {
public:
  virtual ~row_extra() = default;
  /// The bytes it holds, the row's own not counted: what the log-prob budget accounts.
  virtual std::size_t bytes() const = 0;
};

using row_extra_ptr = std::shared_ptr<const row_extra>;

} // namespace canopy::cache
