#pragma once
// A hash map from 64-bit keys to 32-bit values, built for the token trie's children
// index ((parent, token) -> child), which every match and insert probes once per token.
// Open addressing with linear probing in a power-of-two table of 16-byte slots, so a
// lookup usually reads one cache line where std::unordered_map chases a bucket and a
// node; the load factor stays at or under 0.7. Erasing shifts the rest of the probe run
// back instead of leaving a tombstone, so lookups never slow down with churn.
// Thread contract: not thread-safe; one owner.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace canopy::cache {

class child_index {
public:
  /// The value stored under `key`, or nullptr. Valid until the next insert or erase.
  const std::uint32_t* find(std::uint64_t key) const {
    if (size_ == 0)
      return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (!s.used)
        return nullptr;
      if (s.key == key)
        return &s.value;
    }
  }

  /// Adds key -> value; false (and nothing changes) when `key` is already present.
  bool insert(std::uint64_t key, std::uint32_t value);

  /// Removes `key`; false when it was not present.
  bool erase(std::uint64_t key);

  std::size_t size() const { return size_; }
  /// Slots in the table: 0 or a power of two, at least size() / 0.7.
  std::size_t capacity() const { return slots_.size(); }

private:
  struct slot {
    std::uint64_t key = 0;
    std::uint32_t value = 0;
    bool used = false; // fits in the padding, so no key has to mean "empty"
  };

  // The slot where `key`'s probe run starts. Keys differ mostly in a few low bits of
  // each half (parent id, token id), so they are fully mixed (splitmix64's finalizer)
  // before the mask keeps the low bits.
  std::size_t home(std::uint64_t key) const {
    key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9u;
    key = (key ^ (key >> 27)) * 0x94d049bb133111ebu;
    return static_cast<std::size_t>(key ^ (key >> 31)) & mask_;
  }

  void grow();

  std::vector<slot> slots_;
  std::size_t mask_ = 0; // slots_.size() - 1 when not empty
  std::size_t size_ = 0;
};

} // namespace canopy::cache
