#include <canopy/backends/tokenizers/next_byte.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace canopy::backends {

namespace {

constexpr double none = -std::numeric_limits<double>::infinity();

double log_of(double mass) {
  return mass > 0 ? std::log(mass) : none;
}

} // namespace

byte_order::byte_order(const std::vector<std::optional<std::string>>& token_bytes,
                       std::vector<std::int32_t> eos_ids)
    : vocab_size_(token_bytes.size()), eos_ids_(std::move(eos_ids)) {
  for (const auto id : eos_ids_)
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_size_)
      throw std::invalid_argument("EOS id " + std::to_string(id) +
                                  " is outside the vocabulary of " +
                                  std::to_string(vocab_size_));
  // A set: an id named twice counts once.
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  std::vector<bool> is_eos(vocab_size_, false);
  for (const auto id : eos_ids_)
    is_eos[static_cast<std::size_t>(id)] = true;
  for (std::size_t t = 0; t < vocab_size_; ++t)
    if (token_bytes[t] && !token_bytes[t]->empty() && !is_eos[t])
      tokens_.push_back(static_cast<std::int32_t>(t));
  // std::string compares as unsigned bytes (char_traits<char>::lt), a prefix first.
  std::stable_sort(tokens_.begin(), tokens_.end(), [&](std::int32_t a, std::int32_t b) {
    return *token_bytes[static_cast<std::size_t>(a)] <
           *token_bytes[static_cast<std::size_t>(b)];
  });
  bytes_.reserve(tokens_.size());
  for (const auto t : tokens_)
    bytes_.push_back(*token_bytes[static_cast<std::size_t>(t)]);
}

std::pair<std::size_t, std::size_t> byte_order::range(std::string_view prefix) const {
  const auto first = std::lower_bound(
      bytes_.begin(), bytes_.end(), prefix,
      [](const std::string& s, std::string_view p) { return std::string_view(s) < p; });
  // Past `first`, the strings starting with `prefix` come first.
  const auto last = std::partition_point(first, bytes_.end(), [&](const std::string& s) {
    return std::string_view(s).substr(0, prefix.size()) == prefix;
  });
  return {static_cast<std::size_t>(first - bytes_.begin()),
          static_cast<std::size_t>(last - bytes_.begin())};
}

byte_masses::byte_masses(std::shared_ptr<const byte_order> order, cache::row_ptr row)
    : order_(std::move(order)), row_(std::move(row)), values_(row_->float32_data()),
      eos_max_log_(none) {
  if (row_->vocab() != order_->vocab_size())
    throw std::invalid_argument("a row of " + std::to_string(row_->vocab()) +
                                " for a vocabulary of " +
                                std::to_string(order_->vocab_size()));
  const auto n = order_->tokens().size();
  blocks_ = (n + block_tokens - 1) / block_tokens;
  sums_.assign(2 * blocks_, 0.0);
  maxima_.assign(2 * blocks_, -std::numeric_limits<float>::infinity());
  for (std::size_t i = 0; i < n; ++i) {
    const float lp = log_at(i);
    const auto leaf = blocks_ + i / block_tokens;
    sums_[leaf] += std::exp(static_cast<double>(lp));
    maxima_[leaf] = std::max(maxima_[leaf], lp);
  }
  for (std::size_t i = blocks_; i-- > 1;) {
    sums_[i] = sums_[2 * i] + sums_[2 * i + 1];
    maxima_[i] = std::max(maxima_[2 * i], maxima_[2 * i + 1]);
  }
  for (const auto id : order_->eos_ids()) {
    const double lp = values_ ? values_[id] : row_->at(static_cast<std::size_t>(id));
    eos_sum_ += std::exp(lp);
    eos_max_log_ = std::max(eos_max_log_, lp);
  }
}

std::size_t byte_masses::bytes() const {
  return sizeof(*this) + sums_.capacity() * sizeof(double) +
         maxima_.capacity() * sizeof(float);
}

float byte_masses::log_at(std::size_t i) const {
  const auto t = static_cast<std::size_t>(order_->tokens()[i]);
  return values_ ? values_[t] : row_->at(t);
}

namespace {

/// Folds `combine` over the tokens [first, last) of byte order: the partial blocks at
/// its ends token by token (`leaf`), the whole blocks through `tree` (a tree over
/// `blocks` leaves at blocks + b, node i over 2i and 2i + 1: any count works, since
/// both folds commute).
template <class T, class Leaf, class Combine>
T fold_range(std::size_t first, std::size_t last, std::size_t blocks,
             const std::vector<T>& tree, T total, Leaf leaf, Combine combine) {
  constexpr auto block = byte_masses::block_tokens;
  auto scan = [&](std::size_t from, std::size_t to) {
    for (; from < to; ++from)
      total = combine(total, leaf(from));
  };
  const auto block_first = (first + block - 1) / block;
  const auto block_last = last / block;
  if (first >= last || block_first >= block_last) { // no whole block inside
    scan(first, last);
    return total;
  }
  scan(first, block_first * block);
  scan(block_last * block, last);
  for (auto lo = block_first + blocks, hi = block_last + blocks; lo < hi;
       lo /= 2, hi /= 2) {
    if (lo & 1)
      total = combine(total, tree[lo++]);
    if (hi & 1)
      total = combine(total, tree[--hi]);
  }
  return total;
}

} // namespace

double byte_masses::sum(std::size_t first, std::size_t last) const {
  return fold_range(
      first, last, blocks_, sums_, 0.0,
      [&](std::size_t i) { return std::exp(static_cast<double>(log_at(i))); },
      [](double a, double b) { return a + b; });
}

double byte_masses::max_log(std::size_t first, std::size_t last) const {
  return fold_range(
      first, last, blocks_, maxima_, -std::numeric_limits<float>::infinity(),
      [&](std::size_t i) { return log_at(i); },
      [](float a, float b) { return std::max(a, b); });
}

next_byte_distribution byte_masses::next_byte(std::string_view prefix,
                                              byte_reduce reduce) const {
  const bool summing = reduce == byte_reduce::sum;
  // The value of a range: a mass, or a log max (0 or none for an empty range).
  auto value = [&](std::size_t first, std::size_t last) {
    return summing ? sum(first, last) : max_log(first, last);
  };
  const auto& order = *order_;
  auto [first, last] = order.range(prefix);
  // The tokens whose bytes are the prefix come first in its range; then each next
  // byte's, in byte order.
  std::size_t exact_end = first;
  while (exact_end < last && order.bytes_at(exact_end).size() == prefix.size())
    ++exact_end;
  next_byte_distribution out;
  // Each byte present after the prefix is one group of the range, in byte order; a byte
  // absent has no token (0, or no maximum). Only present bytes are searched for, each
  // group's end by galloping from its start, so a deep prefix with few next bytes costs
  // a few short searches rather than 256 over its range.
  std::array<double, 256> child;
  child.fill(summing ? 0.0 : none);
  const auto depth = prefix.size();
  auto byte_at = [&](std::size_t i) {
    return static_cast<unsigned char>(order.bytes_at(i)[depth]);
  };
  for (std::size_t at = exact_end; at < last;) {
    const auto byte = byte_at(at);
    // Gallop: [lo, hi) holds the group's end once byte_at(hi) is past `byte` (or hi is
    // the range's end).
    std::size_t lo = at + 1, step = 1, hi = lo;
    while (hi < last && byte_at(hi) == byte) {
      lo = hi + 1;
      hi = std::min(last, hi + step);
      step *= 2;
    }
    while (lo < hi) {
      const auto mid = lo + (hi - lo) / 2;
      if (byte_at(mid) == byte)
        lo = mid + 1;
      else
        hi = mid;
    }
    child[byte] = value(at, lo);
    at = lo;
  }
  const double exact = value(first, exact_end);
  const bool empty = prefix.empty();
  if (summing) {
    const double z = sum(first, last) + (empty ? eos_sum_ : 0.0);
    out.log_mass = log_of(z);
    const double log_z = out.log_mass;
    auto normalized = [&](double mass) { return z > 0 ? log_of(mass) - log_z : none; };
    for (int x = 0; x < 256; ++x)
      out.logprobs[x] = normalized(child[x]);
    out.end_of_token = empty ? none : normalized(exact);
    if (empty)
      out.eos = normalized(eos_sum_);
  } else {
    out.logprobs = child;
    out.end_of_token = empty ? none : exact;
    if (empty)
      out.eos = eos_max_log_;
    out.log_mass = std::max(max_log(first, last), empty ? eos_max_log_ : none);
  }
  return out;
}

} // namespace canopy::backends
