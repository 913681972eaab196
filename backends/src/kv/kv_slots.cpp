#include "kv/kv_slots.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace canopy::backends {

namespace {

std::vector<std::int64_t> all_rows(std::int64_t n) {
  std::vector<std::int64_t> rows;
  rows.reserve(static_cast<std::size_t>(n));
  for (auto r = n; r-- > 0;)
    rows.push_back(r); // row 0 on top: the first taken
  return rows;
}

} // namespace

kv_slots::kv_slots(std::int64_t device_rows, std::int64_t host_rows) {
  const auto capacity = device_rows + host_rows;
  if (device_rows < 0 || host_rows < 0 || capacity >= (std::int64_t{1} << 32) - 1)
    throw std::invalid_argument(
        "kv storage: capacity out of range: " + std::to_string(device_rows) + " + " +
        std::to_string(host_rows));
  entries_.resize(static_cast<std::size_t>(capacity));
  free_ = all_rows(capacity);
  device_free_ = all_rows(device_rows);
  host_free_ = all_rows(host_rows);
}

const kv_slots::entry* kv_slots::find(cache::kv_handle h) const {
  const auto index = static_cast<std::uint64_t>(h & 0xffffffffu);
  if (index == 0 || index > entries_.size())
    return nullptr;
  const auto& e = entries_[index - 1];
  return e.in_use && e.generation == (h >> 32) ? &e : nullptr;
}

std::vector<kv_slots::slot> kv_slots::chain(cache::kv_handle last, std::uint32_t length,
                                            std::uint32_t newest) const {
  const auto first = length > newest ? length - newest : 0u; // position of out[0]
  std::vector<slot> out(length - first);
  cache::kv_handle h = last;
  for (auto i = length; i-- > first;) {
    const entry* e = find(h);
    if (e == nullptr)
      throw std::invalid_argument("kv storage: unknown or released KV handle " +
                                  std::to_string(h));
    if (e->position != i)
      throw std::invalid_argument("kv storage: KV handle " + std::to_string(h) +
                                  " is at position " + std::to_string(e->position) +
                                  ", expected " + std::to_string(i));
    out[i - first] = static_cast<slot>(h & 0xffffffffu) - 1;
    h = e->parent;
  }
  if (out.empty() && length > 0) { // nothing walked: `last` is still checked
    const entry* e = find(last);
    if (e == nullptr || e->position != length - 1)
      throw std::invalid_argument(
          "kv storage: unknown, released or misplaced KV handle " + std::to_string(last));
  }
  if (first == 0 && h != cache::no_kv)
    throw std::invalid_argument("kv storage: KV handle " + std::to_string(last) +
                                " continues past the stated prefix length " +
                                std::to_string(length));
  return out;
}

std::vector<kv_slots::slot> kv_slots::take(cache::kv_handle parent,
                                           std::uint32_t position, std::size_t n) {
  std::vector<slot> out;
  out.reserve(std::min(n, device_free_.size()));
  for (std::size_t i = 0; i < n && !free_.empty() && !device_free_.empty(); ++i) {
    const slot s = free_.back();
    free_.pop_back();
    auto& e = entries_[static_cast<std::size_t>(s)];
    e.in_use = true;
    e.position = position + static_cast<std::uint32_t>(i);
    e.parent = out.empty() ? parent : handle(out.back());
    e.where = tier::device;
    e.storage_row = device_free_.back();
    device_free_.pop_back();
    out.push_back(s);
  }
  return out;
}

cache::kv_handle kv_slots::handle(slot s) const {
  const auto& e = entries_[static_cast<std::size_t>(s)];
  return (static_cast<cache::kv_handle>(e.generation) << 32) |
         static_cast<cache::kv_handle>(s + 1);
}

void kv_slots::free_slot(slot s) {
  auto& e = entries_[static_cast<std::size_t>(s)];
  e.in_use = false;
  ++e.generation;
  free_rows(e.where).push_back(e.storage_row);
  free_.push_back(s);
}

std::optional<kv_slots::move> kv_slots::relocate(slot s, tier to) {
  auto& e = entries_[static_cast<std::size_t>(s)];
  auto& free = free_rows(to);
  if (e.where == to || free.empty())
    return std::nullopt;
  const move m{s, e.storage_row, free.back()};
  free.pop_back();
  free_rows(e.where).push_back(e.storage_row);
  e.where = to;
  e.storage_row = m.to;
  return m;
}

std::optional<kv_slots::move> kv_slots::demote(cache::kv_handle h) {
  if (find(h) == nullptr)
    return std::nullopt;
  return relocate(static_cast<slot>(h & 0xffffffffu) - 1, tier::host);
}

std::optional<kv_slots::move> kv_slots::promote(slot s) {
  return relocate(s, tier::device);
}

void kv_slots::release(cache::kv_handle h) {
  if (find(h) != nullptr)
    free_slot(static_cast<slot>(h & 0xffffffffu) - 1);
}

void kv_slots::give_back(const std::vector<slot>& slots) {
  for (const slot s : slots)
    if (entries_[static_cast<std::size_t>(s)].in_use)
      free_slot(s);
}

} // namespace canopy::backends
