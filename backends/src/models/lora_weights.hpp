#pragma once
// A LoRA adapter (lora_adapter.hpp) on a model's device, laid out as the forwards fuse
// their projections, and the rows of a pass it applies to. A projection site's output
// gains scale B (A x) for each adapted module, in that module's columns of the fused
// output: q, k and v in qkv's, gate and up in gate_up's (o and down alone).
//
// Unmerged on purpose: one pass mixes queries of several adapters and of the base
// model, each span of rows with its own (lora_span), and the base weights are shared.
// Thread contract: immutable after construction; add_deltas from the worker's thread.

#include <canopy/backends/checkpoints/lora_adapter.hpp>

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

namespace canopy::backends {

/// Where the forwards add a projection's output, in layer order.
enum class lora_site { qkv, out, gate_up, down };

class lora_weights {
public:
  /// `adapter` on `device` in `dtype`, for a model of `config` (load_lora_adapter
  /// checked the shapes against it).
  lora_weights(const lora_adapter& adapter, const model_config& config, at::Device device,
               at::ScalarType dtype);

  /// What it holds on the device: the factors of every adapted module in `dtype`.
  static std::uint64_t bytes_for(const lora_adapter& adapter, at::ScalarType dtype);
  std::uint64_t bytes() const { return bytes_; }

  /// y[rows] += scale B (A x[rows]) for every module of `site` in `layer`: x [T, in]
  /// and y [T, out of the fused site], rows [begin, end).
  void add_deltas(lora_site site, std::int64_t layer, const at::Tensor& x,
                  std::int64_t begin, std::int64_t end, at::Tensor& y) const;

private:
  struct module_factors {
    at::Tensor scaled_b_t;   // [r, out]: scale B^T
    std::int64_t column = 0; // first column of the module's output in the site's
  };
  // One site's modules. Their A factors share the site's input, so they are stacked
  // and applied in one product: a pass's rows under an adapter are few, and a product
  // that small costs its call more than its arithmetic.
  struct site_factors {
    at::Tensor a_t; // [in, r * modules]: each module's A^T, side by side
    std::vector<module_factors> modules;
  };
  // [layer][site]
  std::vector<std::array<site_factors, 4>> layers_;
  std::uint64_t bytes_ = 0;
};

/// Packed rows [begin, end) of a pass computed under `weights`.
struct lora_span {
  std::int64_t begin = 0, end = 0;
  const lora_weights* weights = nullptr;
};
using lora_spans = std::vector<lora_span>;

/// add_deltas of every span.
void add_lora_deltas(const lora_spans& spans, lora_site site, std::int64_t layer,
                     const at::Tensor& x, at::Tensor& y);

} // namespace canopy::backends
