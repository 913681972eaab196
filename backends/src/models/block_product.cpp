#include "models/block_product.hpp"

#include "models/block_dot.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

namespace canopy::backends {

namespace {

struct free_deleter {
  void operator()(void* p) const { std::free(p); }
};

/// An array of T, 64-byte aligned, grown (its contents dropped) to the largest size
/// asked.
template <class T> class scratch_array {
public:
  T* at_least(std::int64_t count) {
    const auto need = static_cast<std::size_t>(count);
    if (need > capacity_) {
      // 64 bytes: a cache line, so that a wide tile's register never splits two.
      const auto bytes = (need * sizeof(T) + 63) / 64 * 64;
      data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!data_)
        throw std::bad_alloc();
      capacity_ = need;
    }
    return data_.get();
  }

private:
  std::unique_ptr<T[], free_deleter> data_;
  std::size_t capacity_ = 0;
};

/// This thread's quantized activations, and their wide repacking.
struct activation_scratch {
  scratch_array<std::int8_t> quants;
  scratch_array<float> scales;
  scratch_array<std::int32_t> sums;
  scratch_array<std::uint8_t> wide_quants;
  scratch_array<float> wide_scales;
};

/// This thread's group made ready for wide tiles (prepare_wide_fn).
struct wide_group_scratch {
  scratch_array<std::int8_t> quants;
  scratch_array<std::int32_t> offsets;
  scratch_array<float> scales;
};

// Note [block product tiles]
// The kernels take a group of eight weight rows against one, two or four activation
// rows (block_dot.hpp), or sixteen in a wide tile where the kernels have them (Note
// [wide tiles]); the activation rows are walked in chunks whose quants stay in the
// core's L2 while every weight group streams past them once per chunk. Groups are
// split over ATen's threads. Each (row, output) pair is computed the same way whatever
// the tile and the split (Note [exact block sums]), so the answer is the same for any
// batch and on any number of threads.
constexpr std::int64_t chunk_bytes = 128 << 10;

/// The tile widths a chunk's rows take: fours, then a two and a one for the rest.
int tile_rows(std::int64_t left) {
  return left >= max_tile_rows ? max_tile_rows : left >= 2 ? 2 : 1;
}

// A wide tile costs the same whatever its real rows: about 105 instructions a block
// against about 80 for a four-row tile (counted, not timed), so from eight rows on it
// beats the four-row tiles that would take them.
constexpr std::int64_t wide_min_rows = 8;

/// A tile's out[k * width + i] (width: its rows) into y's rows t..t+n-1 (n <= width:
/// the real ones), outputs o..o+real-1.
void write_tile(const float* out, std::int64_t width, std::int64_t n, std::int64_t real,
                std::int64_t t, std::int64_t o, std::int64_t outputs, float* y,
                bool accumulate) {
  for (std::int64_t k = 0; k < real; ++k)
    for (std::int64_t i = 0; i < n; ++i) {
      float& target = y[(t + i) * outputs + o + k];
      target = accumulate ? target + out[k * width + i] : out[k * width + i];
    }
}

} // namespace

void multiply_blocks(const float* x, std::int64_t rows, const block_matrix& w, float* y,
                     bool accumulate) {
  multiply_blocks(x, rows, w, y, accumulate, block_kernels_here());
}

void multiply_blocks(const float* x, std::int64_t rows, const block_matrix& w, float* y,
                     bool accumulate, const block_kernels& kernels) {
  thread_local activation_scratch scratch;
  const auto blocks = w.blocks_per_row();
  const auto stride = blocks * block_width;
  auto* quants = scratch.quants.at_least(rows * stride);
  auto* scales = scratch.scales.at_least(rows * blocks);
  auto* sums = scratch.sums.at_least(rows * blocks);
  kernels.quantize(x, rows, w.inputs(), blocks, quants, scales, sums);
  const activation_blocks all{quants, scales, sums, stride, rows, blocks};
  const auto dot = kernels.for_format(w.format());
  const auto prepare_wide = kernels.prepare_wide_for(w.format());
  // Wide tiles take rows 16 by 16 from the first while at least wide_min_rows are left.
  const std::int64_t wide_rows =
      prepare_wide == nullptr ? 0
      : rows % wide_tile_rows >= wide_min_rows
          ? (rows + wide_tile_rows - 1) / wide_tile_rows * wide_tile_rows
          : rows / wide_tile_rows * wide_tile_rows;
  const auto wide_tiles = wide_rows / wide_tile_rows;
  std::uint8_t* wide_quants =
      scratch.wide_quants.at_least(wide_tiles * wide_quant_bytes(blocks));
  float* wide_scales =
      scratch.wide_scales.at_least(wide_tiles * wide_scale_count(blocks));
  for (std::int64_t tile = 0; tile < wide_tiles; ++tile) {
    const auto first = tile * wide_tile_rows;
    pack_wide_rows(all, first, std::min<std::int64_t>(wide_tile_rows, rows - first),
                   wide_quants + tile * wide_quant_bytes(blocks),
                   wide_scales + tile * wide_scale_count(blocks));
  }
  const auto outputs = w.rows();
  // A chunk of whole wide tiles, so that none straddles two.
  const auto chunk = std::max<std::int64_t>(wide_tile_rows, chunk_bytes / stride) /
                     wide_tile_rows * wide_tile_rows;
  // A task of fewer than ~64k multiply-adds costs more to hand out than to run.
  const auto grain =
      std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (rows * stride * group_rows));
  at::parallel_for(0, w.groups(), grain, [&](std::int64_t begin, std::int64_t end) {
    thread_local wide_group_scratch group_scratch;
    float out[group_rows * wide_tile_rows];
    for (std::int64_t first = 0; first < rows; first += chunk) {
      const auto last = std::min(rows, first + chunk);
      const auto wide_last = std::min(last, wide_rows);
      for (auto g = begin; g < end; ++g) {
        const auto o = g * group_rows;
        const weight_rows group{w.quants(o), w.scales(o)};
        const auto real = std::min(group_rows, outputs - o); // padding rows: not stored
        std::int64_t t = first;
        if (t < wide_last) {
          const auto ready = prepare_wide(
              group, blocks,
              group_scratch.quants.at_least(blocks * group_rows * block_width),
              group_scratch.offsets.at_least(blocks * group_rows),
              group_scratch.scales.at_least(blocks * group_rows));
          for (; t < wide_last; t += wide_tile_rows) {
            const auto tile = t / wide_tile_rows;
            kernels.wide_dot(
                ready,
                wide_activations{wide_quants + tile * wide_quant_bytes(blocks),
                                 wide_scales + tile * wide_scale_count(blocks), blocks},
                out);
            write_tile(out, wide_tile_rows,
                       std::min<std::int64_t>(wide_tile_rows, rows - t), real, t, o,
                       outputs, y, accumulate);
          }
        }
        while (t < last) {
          const int n = tile_rows(last - t);
          dot(group, all.from_row(t), n, out);
          write_tile(out, n, n, real, t, o, outputs, y, accumulate);
          t += n;
        }
      }
    }
  });
}

} // namespace canopy::backends
