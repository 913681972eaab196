#pragma once
// KV slots a pass has taken, given back unless the pass commits them (the KV of a pass
// that succeeded, which the cache now holds by handle).
// Thread contract: the worker's thread, as kv_slots.

#include "kv/kv_slots.hpp"

#include <vector>

namespace canopy::backends {

class slot_reservation {
public:
  explicit slot_reservation(kv_slots& slots) : slots_(slots) {}
  ~slot_reservation() {
    if (!committed_)
      slots_.give_back(taken_);
  }
  slot_reservation(const slot_reservation&) = delete;
  slot_reservation& operator=(const slot_reservation&) = delete;
  void add(const std::vector<kv_slots::slot>& s) {
    taken_.insert(taken_.end(), s.begin(), s.end());
  }
  void commit() { committed_ = true; }

private:
  kv_slots& slots_;
  std::vector<kv_slots::slot> taken_;
  bool committed_ = false;
};

} // namespace canopy::backends
