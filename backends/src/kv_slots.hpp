#pragma once
// Bookkeeping of a worker's preallocated KV storage: which slots (rows of the K/V
// tensors) hold a token's KV, the token before it in its sequence, and the handle the
// cache knows it by. The tensors themselves live with the model (torch_backend); this
// class only decides which rows are used, so it is plain C++.
//
// A handle is (generation << 32) | (slot + 1): a handle to a slot that has been
// released (and perhaps reused) no longer matches the slot's generation and is
// refused, so a stale handle is an error, never someone else's KV.
//
// Thread contract: one thread at a time (the worker's).

#include <canopy/cache/types.hpp>

#include <cstdint>
#include <vector>

namespace canopy::backends {

class kv_slots {
public:
  using slot = std::int64_t;

  explicit kv_slots(std::int64_t capacity);

  std::int64_t capacity() const { return static_cast<std::int64_t>(entries_.size()); }
  std::int64_t used() const { return capacity() - static_cast<std::int64_t>(free_.size()); }

  /// The slots of the last `newest` tokens (all, when `newest` >= `length`) of the
  /// sequence that ends at `last`, oldest first. Only those are walked, so KV before
  /// them may have been released (a sliding window reads no further back). Throws
  /// std::invalid_argument when a slot walked is unknown or stale, when `last` is not
  /// at position length - 1, or when a whole sequence walked is not `length` long.
  std::vector<slot> chain(cache::kv_handle last, std::uint32_t length,
                          std::uint32_t newest = UINT32_MAX) const;

  /// Takes up to `n` free slots for consecutive tokens that continue `parent`
  /// (no_kv: a sequence start) at position `position`. Fewer (maybe none) when the
  /// storage is full: KV is prefix-closed, so the tokens that get no slot are the tail.
  std::vector<slot> take(cache::kv_handle parent, std::uint32_t position, std::size_t n);

  /// The cache's handle for a taken slot.
  cache::kv_handle handle(slot s) const;

  /// Frees the slot of `h`; unknown or stale handles are ignored (the cache may
  /// release what a failed pass already gave back).
  void release(cache::kv_handle h);
  /// Frees slots taken by a pass that then failed.
  void give_back(const std::vector<slot>& slots);

private:
  struct entry {
    std::uint32_t generation = 0; // bumped on every release
    std::uint32_t position = 0;   // the token's index in its sequence
    cache::kv_handle parent = cache::no_kv;
    bool in_use = false;
  };
  const entry* find(cache::kv_handle h) const;
  void free_slot(slot s);

  std::vector<entry> entries_;
  std::vector<slot> free_; // a stack: recently freed rows are reused first (warm memory)
};

} // namespace canopy::backends
