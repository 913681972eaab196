#pragma once
// Bookkeeping of a worker's KV storage: which entries (slots) hold a token's KV, the
// token before it in its sequence, the handle the cache knows it by, and where its KV
// lies: a row of the device tier (what passes read) or of the host tier (KV demoted
// to make room on the device, promoted back before a pass reads it). The tensors
// themselves live with the model (kv_storage); this class only decides which rows are
// used, so it is plain C++. A slot keeps its handle whichever tier holds it.
//
// A handle is (generation << 32) | (slot + 1): a handle to a slot that has been
// released (and perhaps reused) no longer matches the slot's generation and is
// refused, so a stale handle is an error, never someone else's KV.
//
// Thread contract: one thread at a time (the worker's).

#include <canopy/cache/types.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace canopy::backends {

class kv_slots {
public:
  using slot = std::int64_t;
  using row = std::int64_t;
  enum class tier : std::uint8_t { device, host };

  /// `device_rows` rows on the device, `host_rows` on the host (0: no host tier).
  explicit kv_slots(std::int64_t device_rows, std::int64_t host_rows = 0);

  /// Slots holding a token's KV, in either tier.
  std::int64_t used() const {
    return static_cast<std::int64_t>(entries_.size() - free_.size());
  }

  /// The slots of the last `newest` tokens (all, when `newest` >= `length`) of the
  /// sequence that ends at `last`, oldest first. Only those are walked, so KV before
  /// them may have been released (a sliding window reads no further back). Throws
  /// std::invalid_argument when a slot walked is unknown or stale, when `last` is not
  /// at position length - 1, or when a whole sequence walked is not `length` long.
  std::vector<slot> chain(cache::kv_handle last, std::uint32_t length,
                          std::uint32_t newest = UINT32_MAX) const;

  /// Takes up to `n` free slots, with device rows, for consecutive tokens that continue
  /// `parent` (no_kv: a sequence start) at position `position`. Fewer (maybe none)
  /// when the device is full: KV is prefix-closed, so the tokens that get no slot are
  /// the tail.
  std::vector<slot> take(cache::kv_handle parent, std::uint32_t position, std::size_t n);

  /// The cache's handle for a taken slot.
  cache::kv_handle handle(slot s) const;
  /// Where a taken slot's KV lies.
  tier where(slot s) const { return entries_[static_cast<std::size_t>(s)].where; }
  row row_of(slot s) const { return entries_[static_cast<std::size_t>(s)].storage_row; }

  /// A move of one slot's KV between tiers: copy row `from` of one tier to row `to` of
  /// the other.
  struct move {
    slot moved;
    row from, to;
  };
  /// Moves the device-tier slot of `h` to a free host row. Nothing (and no move) when
  /// `h` is unknown or stale, already on the host, or the host tier is full.
  std::optional<move> demote(cache::kv_handle h);
  /// Moves host-tier slot `s` to a free device row; nothing when the device is full.
  std::optional<move> promote(slot s);

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
    tier where = tier::device;
    row storage_row = -1;
  };
  const entry* find(cache::kv_handle h) const;
  void free_slot(slot s);
  std::vector<row>& free_rows(tier t) {
    return t == tier::device ? device_free_ : host_free_;
  }
  /// Moves slot `s` to a free row of tier `to`, if any.
  std::optional<move> relocate(slot s, tier to);

  std::vector<entry> entries_;
  std::vector<slot> free_; // a stack: recently freed slots are reused first
  // Per tier, free rows (stacks: recently freed rows are reused first, warm memory).
  std::vector<row> device_free_, host_free_;
};

} // namespace canopy::backends
