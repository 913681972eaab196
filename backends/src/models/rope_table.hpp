#pragma once
// RoPE's cos and sin tables [positions, hd], grown on demand up to the served context.
// A model declaring a context of 2^31 positions (config.json's max_position_embeddings)
// cost 2^31 x hd float64 values at load when the whole table was built up front; now a
// table covers the positions passes have reached, in blocks of block_positions computed
// the same way whenever they are (in float64, then cast), so a position's values never
// depend on when its block was made, nor on how far the table had grown.
// Thread contract: not thread-safe; one model's passes run on its worker's thread.

#include <ATen/ATen.h>

#include <cstdint>

namespace canopy::backends {

class rope_table {
public:
  static constexpr std::int64_t block_positions = 4096;

  /// inverse_frequencies: [hd/2] float64 (rope_inverse_frequencies); tables in `dtype`
  /// on `device`, never past `context` positions.
  rope_table(at::Tensor inverse_frequencies, std::int64_t context, at::ScalarType dtype,
             at::Device device);

  /// Makes the tables cover positions [0, end) (end at most the context): at least
  /// doubling, so growth costs amortized O(1) per position.
  void cover(std::int64_t end);

  std::int64_t covered() const { return covered_; }
  /// [covered(), hd]; valid until the next cover() that grows them.
  const at::Tensor& cos() const { return cos_; }
  const at::Tensor& sin() const { return sin_; }

private:
  at::Tensor inverse_frequencies_;
  std::int64_t context_;
  at::ScalarType dtype_;
  at::Device device_;
  std::int64_t covered_ = 0;
  at::Tensor cos_, sin_;
};

} // namespace canopy::backends
