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

byte_masses::byte_masses(const byte_order& order, const float* logprobs, std::size_t size)
    : order_(order), eos_max_log_(none) {
  if (size != order.vocab_size())
    throw std::invalid_argument("a row of " + std::to_string(size) +
                                " for a vocabulary of " +
                                std::to_string(order.vocab_size()));
  const auto& tokens = order.tokens();
  leaves_ = 1;
  while (leaves_ < std::max<std::size_t>(tokens.size(), 1))
    leaves_ *= 2;
  sums_.assign(2 * leaves_, 0.0);
  maxima_.assign(2 * leaves_, none);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const double lp = logprobs[tokens[i]];
    sums_[leaves_ + i] = std::exp(lp);
    maxima_[leaves_ + i] = lp;
  }
  for (std::size_t i = leaves_ - 1; i >= 1; --i) {
    sums_[i] = sums_[2 * i] + sums_[2 * i + 1];
    maxima_[i] = std::max(maxima_[2 * i], maxima_[2 * i + 1]);
  }
  for (const auto id : order.eos_ids()) {
    const double lp = logprobs[id];
    eos_sum_ += std::exp(lp);
    eos_max_log_ = std::max(eos_max_log_, lp);
  }
}

double byte_masses::sum(std::size_t first, std::size_t last) const {
  double total = 0;
  for (first += leaves_, last += leaves_; first < last; first /= 2, last /= 2) {
    if (first & 1)
      total += sums_[first++];
    if (last & 1)
      total += sums_[--last];
  }
  return total;
}

double byte_masses::max_log(std::size_t first, std::size_t last) const {
  double best = none;
  for (first += leaves_, last += leaves_; first < last; first /= 2, last /= 2) {
    if (first & 1)
      best = std::max(best, maxima_[first++]);
    if (last & 1)
      best = std::max(best, maxima_[--last]);
  }
  return best;
}

next_byte_distribution byte_masses::next_byte(std::string_view prefix,
                                              byte_reduce reduce) const {
  const bool summing = reduce == byte_reduce::sum;
  // The value of a range: a mass, or a log max (0 or none for an empty range).
  auto value = [&](std::size_t first, std::size_t last) {
    return summing ? sum(first, last) : max_log(first, last);
  };
  auto [first, last] = order_.range(prefix);
  // The tokens whose bytes are the prefix come first in its range; then each next
  // byte's, in byte order.
  std::size_t exact_end = first;
  while (exact_end < last && order_.bytes_at(exact_end).size() == prefix.size())
    ++exact_end;
  next_byte_distribution out;
  std::array<double, 256> child{};
  std::size_t at = exact_end;
  for (int x = 0; x < 256; ++x) {
    const auto byte = static_cast<unsigned char>(x);
    // The end of byte x's group: past `at`, every token is longer than the prefix.
    std::size_t lo = at, hi = last;
    while (lo < hi) {
      const auto mid = lo + (hi - lo) / 2;
      if (static_cast<unsigned char>(order_.bytes_at(mid)[prefix.size()]) <= byte)
        lo = mid + 1;
      else
        hi = mid;
    }
    child[x] = value(at, lo);
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
