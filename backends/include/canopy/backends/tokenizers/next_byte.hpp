#pragma once
// Next-byte distributions from a next-token row (issue 30's contract): with P the
// distribution after a sequence and b a byte prefix, the mass of every b + x over the
// tokens whose bytes start with it, the tokens whose bytes are b, and the EOS ids.
// byte_order sorts the vocabulary by its bytes once, so every prefix is one contiguous
// range; byte_masses builds, once per row, a tree of sums and maxima over that order, so
// each prefix is answered in O(256 log V) with no walk over the vocabulary. Sums only
// add non-negative float64 terms (no prefix-sum differences), so a tiny mass keeps its
// relative precision.
// Thread contract: both are immutable once built; any thread may read them at once.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

/// How masses combine: sum (a distribution over next bytes) or max (the best token).
enum class byte_reduce { sum, max };

/// One prefix's answer, in natural logs; -infinity stands for no token (log 0).
struct next_byte_distribution {
  std::array<double, 256> logprobs{}; // [next byte]
  double end_of_token = 0;   // the tokens whose bytes are the prefix (none for "")
  std::optional<double> eos; // the EOS ids: only for the empty prefix
  double log_mass = 0;       // sum: log Z; max: the log max over all of the above
};

/// The vocabulary in the order of its bytes.
class byte_order {
public:
  /// token_bytes[t]: token t's bytes; nullopt (or empty) for a token without bytes (a
  /// control token), which no prefix counts. An EOS id counts only as EOS.
  byte_order(const std::vector<std::optional<std::string>>& token_bytes,
             std::vector<std::int32_t> eos_ids);

  std::size_t vocab_size() const { return vocab_size_; }
  /// Tokens with bytes, in byte order (unsigned, shorter first on a common prefix).
  const std::vector<std::int32_t>& tokens() const { return tokens_; }
  const std::vector<std::int32_t>& eos_ids() const { return eos_ids_; }
  /// [first, last) of tokens() whose bytes start with `prefix`.
  std::pair<std::size_t, std::size_t> range(std::string_view prefix) const;
  /// The bytes of tokens()[i].
  const std::string& bytes_at(std::size_t i) const { return bytes_[i]; }

private:
  std::size_t vocab_size_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::string> bytes_; // [tokens_]
  std::vector<std::int32_t> eos_ids_;
};

/// One row's sums and maxima over a byte_order.
class byte_masses {
public:
  /// `logprobs`: the row, `size` == order.vocab_size() (else std::invalid_argument).
  /// `order` must outlive this.
  byte_masses(const byte_order& order, const float* logprobs, std::size_t size);

  next_byte_distribution next_byte(std::string_view prefix, byte_reduce reduce) const;

private:
  /// Sum of P, or max of log P, over tokens()[first, last).
  double sum(std::size_t first, std::size_t last) const;
  double max_log(std::size_t first, std::size_t last) const;

  const byte_order& order_;
  std::size_t leaves_;               // tokens() padded to a power of two
  std::vector<double> sums_;         // [2 * leaves_] a tree: node i holds 2i and 2i + 1
  std::vector<double> maxima_;       // [2 * leaves_] log P; -infinity for padding
  double eos_sum_ = 0, eos_max_log_; // over the EOS ids
};

} // namespace canopy::backends
