#include "models/decode_graphs.hpp"

#include "models/fused_attention.hpp"

#include <algorithm>
#include <exception>
#include <limits>

namespace canopy::backends {

namespace {

// Note [decode buckets]
// Items and keys are padded up to powers of two, keys from 32: a few dozen buckets
// cover every step, and padding at most doubles a step's work. On a GPU a decode step of
// a ~1B model is bound by its launches, not its arithmetic: a replayed step of 256
// items took 3.4 ms where one of 64 took 2.4 and an eager one 8-14 (docs/benchmarks.md).
// Past these bounds a step's own work outweighs its launches, and it runs ragged; so
// does a step whose bucket would gather more than max_cells keys a layer (items x keys:
// 256 items of 1,024 keys, 32 of 8,192), where padding would double a large gather.
// A padding item reads the storage's zero row through an open mask (so its scores are
// finite), and writes its KV to a row borrowed for the pass; its row is dropped.
//
// Note [one memory pool]
// Every bucket's graph takes its intermediates from one memory pool, the first recorded
// graph's, so that they cost the largest graph's memory rather than the sum. CUDA's
// rule for sharing is that graphs replay in the order they were recorded; ours replay in
// any order, which is safe here because a graph's only tensor that outlives its replay
// is its output, and run()'s caller has read that (torch_backend copies it to the host
// and waits) before the next replay, of any bucket, may overwrite it.
constexpr std::int64_t min_keys = 32;
constexpr std::int64_t max_items = 256;
constexpr std::int64_t max_keys = 8192;
constexpr std::int64_t max_cells = std::int64_t{1} << 18;

std::int64_t power_of_two_from(std::int64_t n, std::int64_t least) {
  std::int64_t p = least;
  while (p < n)
    p *= 2;
  return p;
}

} // namespace

// The bucket's inputs are one int64 tensor, so one copy brings a step to the device:
//   [tokens B | positions B | stores B | key counts B | keys B*L].
struct decode_graphs::bucket {
  bucket(std::int64_t items, std::int64_t keys, const kv_storage& kv, at::Device device,
         at::ScalarType dtype)
      : items(items), keys(keys), pinned(device.is_cuda()),
        inputs(at::empty({4 * items + items * keys},
                         at::TensorOptions(at::kLong).device(device))),
        rows(at::arange(items, at::TensorOptions(at::kLong).device(device))),
        key_positions(at::arange(keys, at::TensorOptions(at::kLong).device(device))) {
    tokens = inputs.narrow(0, 0, items);
    positions = inputs.narrow(0, items, items);
    stores = inputs.narrow(0, 2 * items, items);
    key_counts = inputs.narrow(0, 3 * items, items);
    // A pass's layout, in the bucket's fixed shape: one group, every item one query, in
    // packed order (ragged_attention.hpp). The host layout's positions stay empty: the
    // model's positions were made ready beforehand (transformer::prepare_positions).
    host.packed_rows = items;
    host.identity = true;
    host.groups.resize(1);
    layout.host = &host;
    layout.positions = positions;
    auto& g = layout.groups.emplace_back();
    g.fused = device.is_cuda() && fused_attention_available();
    g.items = items;
    g.queries = 1;
    g.keys = keys;
    g.key_index = inputs.narrow(0, 4 * items, items * keys);
    g.mask = at::empty({items, 1, 1, 1, keys}, at::TensorOptions(dtype).device(device));
    zero_row = kv.zero_row();
  }

  /// `step`'s inputs on the host, items and keys padded, in pinned memory below a GPU.
  /// Fresh each step (LibTorch's caching host allocator recycles them): the worker may
  /// stage the next step before this one's upload has run on the stream.
  at::Tensor stage(const decode_step& step) const {
    auto staged =
        at::empty(inputs.sizes(), at::TensorOptions(at::kLong).pinned_memory(pinned));
    const auto real = static_cast<std::int64_t>(step.tokens.size());
    auto* at = staged.data_ptr<std::int64_t>();
    auto fill = [&](const std::vector<std::int64_t>& from, std::int64_t pad) {
      std::copy(from.begin(), from.begin() + real, at);
      std::fill(at + real, at + items, pad);
      at += items;
    };
    fill(step.tokens, 0);
    fill(step.positions, 0);
    std::copy(step.stores.begin(), step.stores.end(), at);
    at += items;
    fill(step.key_counts, 1); // a padding item reads the zero row
    auto next_key = step.keys.begin();
    for (std::int64_t i = 0; i < items; ++i, at += keys) {
      const auto n = i < real ? step.key_counts[static_cast<std::size_t>(i)] : 0;
      std::copy(next_key, next_key + n, at);
      std::fill(at + n, at + keys, zero_row);
      next_key += n;
    }
    return staged;
  }

  std::int64_t items, keys, zero_row = 0;
  bool pinned;       // inputs are staged in pinned memory
  at::Tensor inputs; // on the device; the views below are its parts
  at::Tensor tokens, positions, stores, key_counts;
  at::Tensor rows, key_positions; // 0..items-1, 0..keys-1
  pass_layout host;
  device_layout layout;
  std::unique_ptr<recorded_step> recorded; // null: eager, or not recorded yet
};

decode_graphs::decode_graphs(const transformer& model, kv_storage& kv, at::Device device,
                             at::ScalarType dtype, mode how)
    : model_(model), kv_(kv), device_(device), dtype_(dtype), mode_(how) {}

decode_graphs::~decode_graphs() = default;

std::optional<std::size_t> decode_graphs::padding_for(std::size_t items,
                                                      std::int64_t keys) const {
  const auto n = static_cast<std::int64_t>(items);
  if (n == 0 || n > max_items || keys > max_keys)
    return std::nullopt;
  const auto padded = power_of_two_from(n, 1);
  if (padded * power_of_two_from(keys, min_keys) > max_cells)
    return std::nullopt;
  return static_cast<std::size_t>(padded - n);
}

decode_graphs::bucket& decode_graphs::bucket_for(std::int64_t items, std::int64_t keys) {
  const auto shape =
      std::make_pair(power_of_two_from(items, 1), power_of_two_from(keys, min_keys));
  auto& b = buckets_[shape];
  if (!b)
    b = std::make_unique<bucket>(shape.first, shape.second, kv_, device_, dtype_);
  return *b;
}

at::Tensor decode_graphs::compute(bucket& b) const {
  // Keys past an item's count are masked out; the mask is made in the step, from the
  // counts, so a recorded step makes it too.
  auto& mask = b.layout.groups[0].mask;
  const auto hidden = b.key_positions.unsqueeze(0) >= b.key_counts.unsqueeze(1);
  mask.zero_().masked_fill_(hidden.view(mask.sizes()),
                            -std::numeric_limits<double>::infinity());
  const pass_kv kv{&kv_, true, at::Tensor(), b.stores, at::Tensor()};
  return model_.forward(b.tokens, b.layout, kv, b.rows, {});
}

at::Tensor decode_graphs::run(const decode_step& step, profile_clock& clock) {
  const auto real = static_cast<std::int64_t>(step.tokens.size());
  const auto most_keys =
      *std::max_element(step.key_counts.begin(), step.key_counts.end());
  const auto latest = *std::max_element(step.positions.begin(), step.positions.end()) + 1;
  const auto generation = model_.prepare_positions(latest);
  if (generation != positions_generation_) {
    // The tensors recorded steps read moved: record again as buckets are next used.
    for (auto& [shape, b] : buckets_)
      b->recorded.reset();
    first_recorded_ = nullptr;
    positions_generation_ = generation;
  }
  auto& b = bucket_for(real, most_keys);
  b.inputs.copy_(b.stage(step), /*non_blocking=*/true);
  clock.lap("decode step: inputs");
  if (mode_ == mode::recorded && !b.recorded) {
    try {
      b.recorded = record_step([&] { return compute(b); }, device_, first_recorded_);
      if (!first_recorded_)
        first_recorded_ = b.recorded.get();
      clock.lap("decode step: record");
    } catch (const std::exception&) {
      // A step this LibTorch cannot record is still a step it can compute: this one
      // and every later one run eagerly, and the profile names why.
      mode_ = mode::eager;
      clock.lap("decode step: recording failed, eager from now on");
    }
  }
  if (mode_ == mode::eager) {
    const auto out = compute(b);
    clock.lap("decode step: eager, padded");
    return out.narrow(0, 0, real);
  }
  b.recorded->replay();
  clock.lap("decode step: replay");
  return b.recorded->output().narrow(0, 0, real);
}

} // namespace canopy::backends
