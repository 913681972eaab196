#pragma once
// Next-byte distributions from a next-token row (issue 30's contract): with P the
// distribution after a sequence and b a byte prefix, the mass of every b + x over the
// tokens whose bytes start with it, the tokens whose bytes are b, and the EOS ids.
// byte_order sorts the vocabulary by its bytes once, so every prefix is one contiguous
// range; byte_masses builds, once per row, the sums and maxima of blocks of that order
// and a tree over the blocks, so each prefix is answered in O(256 (log V + block)) with
// no walk over the vocabulary. Sums only add non-negative float64 terms (no prefix-sum
// differences), so a tiny mass keeps its relative precision.
//
// Note [masses beside rows]: byte_masses is what the trie keeps beside a row
// (cache::row_extra), charged to the log-prob budget, so that a repeated next-byte call
// on a cached row costs neither a pass nor a walk. It reads the leaves from the row it
// holds (which the trie holds anyway) and keeps only one sum and one maximum per block of
// block_tokens, in a tree: about 1.5 bytes per token against the row's 4 (a tree over
// every token would take 24). Partial blocks at a range's ends are summed from the row.
//
// Thread contract: both are immutable once built; any thread may read them at once.

#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/row_extra.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
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

/// One row's block sums and maxima over a byte_order (Note [masses beside rows]).
class byte_masses final : public cache::row_extra {
public:
  /// Tokens of byte order per block: a range's partial blocks cost up to twice this
  /// many terms; the blocks cost 24 / block_tokens bytes per token.
  static constexpr std::size_t block_tokens = 16;

  /// `row` must have order->vocab_size() entries (else std::invalid_argument).
  byte_masses(std::shared_ptr<const byte_order> order, cache::row_ptr row);

  next_byte_distribution next_byte(std::string_view prefix, byte_reduce reduce) const;
  /// The blocks and the tree; the row and the order are not counted (the trie counts
  /// the row, and one order serves every row).
  std::size_t bytes() const override;

private:
  /// log P of tokens()[i], read from the row.
  float log_at(std::size_t i) const;
  /// Sum of P, or max of log P, over tokens()[first, last).
  double sum(std::size_t first, std::size_t last) const;
  double max_log(std::size_t first, std::size_t last) const;

  std::shared_ptr<const byte_order> order_;
  cache::row_ptr row_;
  const float* values_; // the row's float32 values, or nullptr (decoded one by one)
  std::size_t blocks_;
  // Trees over the blocks with blocks_ leaves (at blocks_ + b): node i holds 2i and 2i+1.
  std::vector<double> sums_;  // [2 * blocks_] sums of P
  std::vector<float> maxima_; // [2 * blocks_] max log P (a float32 of the row: exact)
  double eos_sum_ = 0, eos_max_log_; // over the EOS ids
};

} // namespace canopy::backends
