#pragma once
// How a worker stores KV: the one place that knows a format's element type, its bytes
// per token, how new KV is written (converted or quantized) and how attention reads it
// back (in place, or converted to the compute dtype). K and V of one layer are each a
// kv_plane in the same format.
//
// Formats (the engine setting kv_dtype; empty: the compute dtype):
//  - float32, float16, bfloat16 (kv_format_cast.cpp): the elements in that dtype;
//  - int8 (kv_format_int8.cpp): symmetric, one float32 scale per token and head.
// A new format is one file implementing kv_format and one line in make_kv_format.
//
// Thread contract: a kv_format is immutable and may be shared; the planes it writes
// belong to one worker (its thread only).

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace canopy::backends {

/// K or V of one layer: [rows, KV, hd] elements, plus what the format needs beside
/// them (int8: [rows, KV] float32 scales; else undefined).
struct kv_plane {
  at::Tensor elements;
  at::Tensor scales;
};

class kv_format {
public:
  virtual ~kv_format() = default;

  /// The kv_dtype value that names this format.
  virtual std::string name() const = 0;
  /// Bytes one token's K (or V) of one head takes, scales included.
  virtual std::uint64_t bytes_per_head(std::int64_t head_dim) const = 0;
  /// Bytes one token's K and V take in every layer and KV head.
  std::uint64_t bytes_per_token(std::int64_t layers, std::int64_t kv_heads,
                                std::int64_t head_dim) const {
    return 2 * static_cast<std::uint64_t>(layers * kv_heads) * bytes_per_head(head_dim);
  }
  /// False when storing and reading back may change a value beyond a cast to the
  /// compute dtype (quantization).
  virtual bool exact() const = 0;
  /// The most storing moves an element, relative to it (float formats: half a unit in
  /// the last place) or to its head's largest element (int8: half a step).
  virtual double unit_roundoff() const = 0;

  /// An uninitialized plane of `rows` x `kv_heads` x `head_dim` where `placement` says
  /// (its device, and whether host memory is pinned); the format picks the dtypes.
  virtual kv_plane allocate(std::int64_t rows, std::int64_t kv_heads,
                            std::int64_t head_dim, at::TensorOptions placement) const = 0;
  /// Stores x [S, KV, hd] (any floating dtype, the plane's device) at rows `slots` [S].
  virtual void write(kv_plane& plane, const at::Tensor& slots,
                     const at::Tensor& x) const = 0;
  /// Stores one token's x [KV * hd] float32 at row `slot` (CPU planes; the direct
  /// forward). The same values as write() gives for the same floats.
  virtual void write_row(kv_plane& plane, std::int64_t slot, const float* x) const = 0;
  /// Rows `index` [N] of the plane as [N, KV, hd] in `dtype`.
  virtual at::Tensor gather(const kv_plane& plane, const at::Tensor& index,
                            at::ScalarType dtype) const = 0;
  /// CPU planes: the float32 elements when they can be read in place, else null.
  virtual const float* in_place(const kv_plane& plane) const = 0;
  /// CPU planes: head `head` of rows rows[0..n) as float32 into out [n, hd].
  virtual void read_head(const kv_plane& plane, const std::int64_t* rows, std::int64_t n,
                         std::int64_t head, float* out) const = 0;
};

/// The format `name` names (empty: `compute`'s own dtype). Throws
/// std::invalid_argument naming the known formats (kv_dtype_names()) for an unknown
/// name.
std::unique_ptr<kv_format> make_kv_format(const std::string& name,
                                          at::ScalarType compute);

// The formats (one file each).
std::unique_ptr<kv_format> make_cast_kv_format(at::ScalarType element);
std::unique_ptr<kv_format> make_int8_kv_format();

} // namespace canopy::backends
