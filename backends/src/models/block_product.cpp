#include "models/block_product.hpp"

#include "models/block_dot.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

namespace canopy::backends {

namespace {

/// This thread's quantized activations, grown to the largest product so far.
class activation_scratch {
public:
  void reserve(std::int64_t rows, std::int64_t blocks) {
    const auto need = static_cast<std::size_t>(rows * blocks);
    if (need <= capacity_)
      return;
    quants_.reset(static_cast<std::int8_t*>(std::aligned_alloc(32, need * block_width)));
    scales_.reset(static_cast<float*>(std::aligned_alloc(32, need * sizeof(float))));
    sums_.reset(
        static_cast<std::int32_t*>(std::aligned_alloc(32, need * sizeof(std::int32_t))));
    if (!quants_ || !scales_ || !sums_)
      throw std::bad_alloc();
    capacity_ = need;
  }
  std::int8_t* quants() { return quants_.get(); }
  float* scales() { return scales_.get(); }
  std::int32_t* sums() { return sums_.get(); }

private:
  struct free_deleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<std::int8_t[], free_deleter> quants_;
  std::unique_ptr<float[], free_deleter> scales_;
  std::unique_ptr<std::int32_t[], free_deleter> sums_;
  std::size_t capacity_ = 0;
};

// Note [block product tiles]
// The kernels take a group of eight weight rows against one, two or four activation
// rows (block_dot.hpp); the activation rows are walked in chunks whose quants stay in
// the core's L2 while every weight group streams past them once per chunk. Groups are
// split over ATen's threads. Each (row, output) pair is computed the same way whatever
// the tile and the split (Note [exact block sums]), so the answer is the same for any
// batch and on any number of threads.
constexpr std::int64_t chunk_bytes = 128 << 10;

/// The tile widths a chunk's rows take: fours, then a two and a one for the rest.
int tile_rows(std::int64_t left) {
  return left >= max_tile_rows ? max_tile_rows : left >= 2 ? 2 : 1;
}

} // namespace

void multiply_blocks(const float* x, std::int64_t rows, const block_matrix& w, float* y,
                     bool accumulate) {
  thread_local activation_scratch scratch;
  const auto blocks = w.blocks_per_row();
  const auto stride = blocks * block_width;
  scratch.reserve(rows, blocks);
  const auto& kernels = block_kernels_here();
  kernels.quantize(x, rows, w.inputs(), blocks, scratch.quants(), scratch.scales(),
                   scratch.sums());
  const activation_blocks all{
      scratch.quants(), scratch.scales(), scratch.sums(), stride, rows, blocks};
  const auto dot = kernels.for_format(w.format());
  const auto outputs = w.rows();
  const auto chunk = std::max<std::int64_t>(max_tile_rows, chunk_bytes / stride);
  // A task of fewer than ~64k multiply-adds costs more to hand out than to run.
  const auto grain =
      std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (rows * stride * group_rows));
  at::parallel_for(0, w.groups(), grain, [&](std::int64_t begin, std::int64_t end) {
    float out[group_rows * max_tile_rows];
    for (std::int64_t first = 0; first < rows; first += chunk) {
      const auto last = std::min(rows, first + chunk);
      for (auto g = begin; g < end; ++g) {
        const auto o = g * group_rows;
        const weight_rows group{w.quants(o), w.scales(o)};
        const auto real = std::min(group_rows, outputs - o); // padding rows: not stored
        for (std::int64_t t = first; t < last;) {
          const int n = tile_rows(last - t);
          activation_blocks tile = all;
          tile.quants += t * stride;
          tile.scales += t;
          tile.sums += t;
          dot(group, tile, n, out);
          for (std::int64_t k = 0; k < real; ++k)
            for (int i = 0; i < n; ++i) {
              float& target = y[(t + i) * outputs + o + k];
              target = accumulate ? target + out[k * n + i] : out[k * n + i];
            }
          t += n;
        }
      }
    }
  });
}

} // namespace canopy::backends
