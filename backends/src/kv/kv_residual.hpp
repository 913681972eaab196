#pragma once
// Residual tokens (torch_options::kv_residual_tokens = R): the newest R tokens a worker
// stored keep a copy of their KV in the compute dtype beside the stored format, and
// passes read the copy while it lasts (HF's QuantizedCache keeps its newest tokens
// unquantized the same way). Attention weighs recent tokens most, so a lossy format
// costs far less when they are exact.
//
// A ring of R rows per layer: each stored token takes the next row, and the token that
// row held loses its copy (it is then read in the stored format). For one sequence
// that is its last R tokens; N sequences extended together keep about R / N each.
// Which tokens have copies depends on what the worker stored lately, so a lossy
// format's answer can differ by up to the format's error with and without a copy.
//
// Thread contract: the worker's thread only.

#include "kv/kv_format.hpp"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace canopy::backends {

class kv_residual {
public:
  /// `rows` copies (R >= 1) per layer; `slots`: the storage's rows, its zero row
  /// included.
  kv_residual(std::int64_t rows, std::int64_t layers, std::int64_t slots,
              std::int64_t kv_heads, std::int64_t head_dim, at::ScalarType compute,
              at::Device device);

  /// Bytes one token's copy takes (all layers, K and V).
  static std::uint64_t bytes_per_token(std::int64_t layers, std::int64_t kv_heads,
                                       std::int64_t head_dim, at::ScalarType compute);

  /// A pass is about to store `slots` (in the order write() gets their rows): the
  /// newest R of them get ring rows, the others lose any copy.
  void assign(const std::vector<std::int64_t>& slots);
  /// Copies the rows of x [S, KV, hd] (the pass's stored rows, in assign's order) that
  /// got ring rows.
  void write(std::int64_t layer, bool keys, const at::Tensor& x);
  /// Copies one token's float32 x [KV * hd] if `slot` has a ring row (CPU).
  void write_row(std::int64_t layer, bool keys, std::int64_t slot, const float* x);

  /// `stored` [N, KV, hd] (rows `index` read in the format), with the rows that have
  /// copies replaced by them.
  at::Tensor overlay(std::int64_t layer, bool keys, const at::Tensor& index,
                     const at::Tensor& stored) const;
  /// Head `head` of rows[0..n) in out [n, hd] float32 (read in the format) replaced by
  /// the copies of the rows that have them (CPU, float32 compute).
  void overlay_head(std::int64_t layer, bool keys, const std::int64_t* rows,
                    std::int64_t n, std::int64_t head, float* out) const;

  /// The newest tokens of the pass with `stored` rows of new KV in total: how many of
  /// them, at the end, a pass reads from copies.
  std::int64_t copies_of(std::int64_t stored) const { return std::min(stored, rows_); }

private:
  const at::Tensor& plane(std::int64_t layer, bool keys) const {
    return (keys ? keys_ : values_)[static_cast<std::size_t>(layer)];
  }

  std::int64_t rows_;
  std::vector<at::Tensor> keys_, values_; // per layer [R, KV, hd], compute dtype
  std::vector<std::int64_t> owner_;       // ring row -> slot it holds (-1: none)
  std::vector<std::int64_t> ring_of_;     // slot -> its ring row (-1: no copy)
  at::Tensor ring_of_slot_;               // ring_of_ on the device
  std::int64_t next_ = 0;                 // the ring row the next token takes
  at::Tensor pass_rows_, pass_sources_;   // this pass: ring rows, and which stored rows
};

} // namespace canopy::backends
