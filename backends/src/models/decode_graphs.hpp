#pragma once
// Decode passes in fixed shapes, so that a GPU can replay them as CUDA graphs.
//
// A decode pass gives each item one new token and asks for one row: the SMC step, the
// engine's most common pass. Its shape (items, and keys each item reads) changes every
// step, and a recorded graph holds one shape. So the items are padded up to a bucket:
// a power of two of items, each reading a power of two of keys (Note [decode buckets]
// in decode_graphs.cpp). Each bucket owns its input and output tensors, written in
// place step after step, and on a CUDA device its recorded step (recorded_step.hpp).
//
// Modes (torch_options::decode_graphs):
//  - recorded: buckets recorded as CUDA graphs on first use, replayed after;
//  - eager: the same padded, fixed-shape step run op by op on any device: what the
//    tests check a recorded step's numbers against, on a CPU.
//
// Thread contract: the worker's thread only, as the model and KV storage it uses.

#include "kv/kv_storage.hpp"
#include "models/recorded_step.hpp"
#include "models/transformer.hpp"

#include <canopy/backends/pass_profile.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace canopy::backends {

/// One decode pass's items on the host.
struct decode_step {
  std::vector<std::int64_t> tokens;     // [B] each item's new token
  std::vector<std::int64_t> positions;  // [B] its position
  std::vector<std::int64_t> keys;       // the storage rows each item reads, item after
                                        // item: its visible prefix, then its own row
  std::vector<std::int64_t> key_counts; // [B] how many of `keys` each item reads
  std::vector<std::int64_t> stores;     // storage row of each item's new KV, then one
                                        // (borrowed) for each padding item of the bucket
};

class decode_graphs {
public:
  enum class mode { eager, recorded };

  /// `model` and `kv` outlive this; `kv`'s planes never move (allocated once).
  decode_graphs(const transformer& model, kv_storage& kv, at::Device device,
                at::ScalarType dtype, mode how);
  ~decode_graphs();
  decode_graphs(const decode_graphs&) = delete;
  decode_graphs& operator=(const decode_graphs&) = delete;

  /// The padding items a step of `items` items reading at most `keys` keys each takes,
  /// or nullopt when no bucket holds it (the pass runs as a ragged one).
  std::optional<std::size_t> padding_for(std::size_t items, std::int64_t keys) const;

  /// Runs `step` (whose `stores` include the padding padding_for gave) through its
  /// bucket. Returns its rows [B, V] float32 on the device, valid until the next run.
  at::Tensor run(const decode_step& step, profile_clock& clock);

private:
  struct bucket;
  bucket& bucket_for(std::int64_t items, std::int64_t keys);
  at::Tensor compute(bucket& b) const;

  const transformer& model_;
  kv_storage& kv_;
  at::Device device_;
  at::ScalarType dtype_;
  mode mode_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<bucket>> buckets_;
  std::int64_t positions_generation_ = -1; // the model's, when the graphs were recorded
  const recorded_step* first_recorded_ = nullptr; // whose memory pool the others share
};

} // namespace canopy::backends
