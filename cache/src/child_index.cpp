#include <canopy/cache/child_index.hpp>

namespace canopy::cache {

bool child_index::insert(std::uint64_t key, std::uint32_t value) {
  // Grow first, so that the slot found below stays where it is. 7/10 keeps probe
  // runs short while a table of n keys costs at most about 3n slots of 16 bytes.
  if ((size_ + 1) * 10 > slots_.size() * 7)
    grow();
  std::size_t i = home(key);
  for (; slots_[i].used; i = (i + 1) & mask_)
    if (slots_[i].key == key)
      return false;
  slots_[i] = slot{key, value, true};
  ++size_;
  return true;
}

bool child_index::erase(std::uint64_t key) {
  if (size_ == 0)
    return false;
  std::size_t hole = home(key);
  for (; slots_[hole].used; hole = (hole + 1) & mask_)
    if (slots_[hole].key == key)
      break;
  if (!slots_[hole].used)
    return false;
  // Backward-shift deletion: every later key of the run whose home is not after the
  // hole (cyclically) moves into it, so no run is cut short and no tombstone is left.
  for (std::size_t j = (hole + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
    const std::size_t from_home = (j - home(slots_[j].key)) & mask_;
    const std::size_t from_hole = (j - hole) & mask_;
    if (from_home >= from_hole) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = slot{};
  --size_;
  return true;
}

void child_index::grow() {
  std::vector<slot> old(slots_.empty() ? 16 : slots_.size() * 2);
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  for (const slot& s : old) {
    if (!s.used)
      continue;
    std::size_t i = home(s.key);
    while (slots_[i].used)
      i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

} // namespace canopy::cache
