#include <canopy/backends/models/torch_backend.hpp>

#include <canopy/backends/model_fingerprint.hpp>

#include "kv/index_tensor.hpp"
#include "kv/kv_format.hpp"
#include "kv/kv_slots.hpp"
#include "kv/pass_kv.hpp"
#include "kv/slot_reservation.hpp"
#include "models/bfloat16_product.hpp"
#include "models/blas_core.hpp"
#include "models/block_dot.hpp"
#include "models/decode_graphs.hpp"
#include "models/direct_llama_forward.hpp"
#include "models/float_product.hpp"
#include "models/lora_weights.hpp"
#include "models/pass_layout.hpp"
#include "models/started_torch_pass.hpp"
#include "models/torch_weights.hpp"
#include "models/transformer.hpp"
#include "models/weight_format.hpp"

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace canopy::backends {

double compute_roundoff(const torch_options& options) {
  return make_kv_format(options.dtype, at::kFloat)->unit_roundoff();
}

double kv_storage_roundoff(const torch_options& options) {
  const auto compute = compute_roundoff(options);
  const auto stored = make_kv_format(options.kv_dtype, at::kFloat)->unit_roundoff();
  return options.kv_dtype.empty() || stored <= compute ? 0.0 : stored;
}

namespace {

/// The format a model's matrices are served in: weight_dtype's, or with weight_dtype
/// unset the file's own blocks where blocks run (the CPU, float32), the narrowest its
/// layers hold, so that a quantized GGUF file is not expanded into float32 unasked;
/// nullopt for dense weights (weight_dtype the compute dtype, or unset with float
/// weights or elsewhere).
std::optional<weight_format> served_format(const torch_options& options,
                                           const checkpoint& ckpt, at::Device device,
                                           at::ScalarType dtype) {
  if (options.weight_dtype == options.dtype)
    return std::nullopt;
  if (!options.weight_dtype.empty())
    return parse_weight_format(options.weight_dtype);
  if (!device.is_cpu() || dtype != at::kFloat || !llama_style(ckpt.config.arch))
    return std::nullopt;
  std::optional<block_format> narrowest;
  for (const auto& [name, view] : ckpt.tensors)
    if (const auto format = block_format_of(view.dtype);
        format && name.rfind("model.layers.", 0) == 0 &&
        (!narrowest || *format == block_format::q4_0))
      narrowest = format;
  if (!narrowest)
    return std::nullopt;
  return format_of(*narrowest);
}

} // namespace

double block_roundoff(const model_info& served) {
  const auto format = value_of(weight_format_names, served.weight_dtype);
  return format && blocks_of(*format) ? 1.0 / 254 : 0.0;
}

namespace {

std::string weight_kernels_of(std::optional<weight_format> format) {
  if (!format)
    return "";
  return blocks_of(*format) ? block_kernels_here().isa : bfloat16_kernels_here();
}

} // namespace

std::string weight_kernels_here(const torch_options& options) {
  if (options.weight_dtype == options.dtype)
    return "";
  return weight_kernels_of(parse_weight_format(options.weight_dtype));
}

std::string cpu_kernels_here() {
  const auto core = blas_core();
  return std::string("products ") + float_product_kernels_here() + ", " +
         (core.empty() ? std::string("a BLAS other than OpenBLAS") : "OpenBLAS " + core);
}

int cuda_device_count() {
  return at::detail::getCUDAHooks().getNumGPUs();
}

namespace {

at::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32")
    return at::kFloat;
  if (name == "float16")
    return at::kHalf;
  if (name == "bfloat16")
    return at::kBFloat16;
  throw std::invalid_argument("unknown dtype '" + name +
                              "' (known: float32, float16, bfloat16)");
}

at::Device parse_device(const std::string& name) {
  if (name == "cpu")
    return at::kCPU;
  if (name.rfind("cuda", 0) != 0)
    throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda or cuda:N)");
  const int count = cuda_device_count();
  if (count == 0)
    throw std::invalid_argument(
        "device '" + name +
        "': this LibTorch has no CUDA device (Debian's libtorch is "
        "CPU-only); use \"cpu\"");
  const at::Device device(name == "cuda" ? std::string("cuda:0") : name);
  if (device.index() >= count)
    throw std::invalid_argument("device '" + name + "': only " + std::to_string(count) +
                                " CUDA device(s) are visible");
  return device;
}

// Note [KV headroom]
// The storage is exactly the KV byte budget. The cache evicts only when it stores
// new KV, so if it could fill the storage, a pass would find no free row for its new
// tokens, keep none, and the cache would never evict to make room: KV reuse would
// stop for good. The cache therefore keeps at most 7/8 of the storage; the rest is
// room for passes in flight (what does not fit is computed but not kept).
constexpr std::int64_t keep_eighths = 7;

[[noreturn]] void fail_item(std::size_t index, const std::string& problem) {
  throw std::invalid_argument("pass item " + std::to_string(index) + ": " + problem);
}

/// How decode passes run under `options` on `device` (decode_graphs.hpp); nullopt:
/// ragged, as every other pass. Throws std::invalid_argument for an unknown setting, and
/// for buckets asked beside residual KV (whose rows a pass picks on the host).
std::optional<decode_graphs::mode> decode_graphs_mode(const torch_options& options,
                                                      at::Device device) {
  const auto& asked = options.decode_graphs;
  if (auto problem = decode_graphs_problem(asked); !problem.empty())
    throw std::invalid_argument(problem);
  if (asked == "eager" && options.kv_residual_tokens > 0)
    throw std::invalid_argument("decode_graphs 'eager' cannot run beside "
                                "kv_residual_tokens; use 'auto' or 'off'");
  if (asked == "eager")
    return decode_graphs::mode::eager;
  if (asked == "auto" && device.is_cuda() && can_record_steps() &&
      options.kv_residual_tokens == 0)
    return decode_graphs::mode::recorded;
  return std::nullopt;
}

/// What a pass's forward computed: its answer rows and what they cost.
struct computed {
  at::Tensor rows;             // [answers, vocab] float32, item after item; on the
                               // device of the pass, or the host (valid until the next)
  std::int64_t tokens = 0;     // new tokens computed
  std::int64_t key_visits = 0; // (query, key) pairs attention scored
  std::int64_t answers = 0;    // rows of `rows`
};

class torch_backend final : public backend_i {
public:
  torch_backend(const checkpoint& ckpt, const std::string& device,
                const torch_options& options)
      : device_(parse_device(device)), dtype_(parse_dtype(options.dtype)),
        threads_(options.threads), adapter_budget_bytes_(options.adapter_budget_bytes) {
    if (dtype_ == at::kHalf && device_.is_cpu())
      throw std::invalid_argument("dtype float16 needs a CUDA device (LibTorch has no "
                                  "float16 matmul on the CPU); use bfloat16 or float32");
    if (device_.is_cuda()) {
      // Reduced-precision matmuls would break agreement with the reference.
      at::globalContext().setAllowTF32CuBLAS(false);
      at::globalContext().setAllowTF32CuDNN(false);
    }
    checkpoint served = ckpt; // views and storage are shared, not copied
    served.config = served_config(ckpt.config, options);
    const auto weights = served_format(options, ckpt, device_, dtype_);
    model_ = make_transformer(served, dtype_, device_, weights);
    const auto& c = model_->config();
    auto format = make_kv_format(options.kv_dtype, dtype_);
    const auto per_token =
        format->bytes_per_token(c.num_layers, c.num_kv_heads, c.head_dim);
    // Residual copies come out of the same budget.
    const auto residual = static_cast<std::int64_t>(options.kv_residual_tokens);
    const auto residual_bytes =
        options.kv_residual_tokens *
        kv_residual::bytes_per_token(c.num_layers, c.num_kv_heads, c.head_dim, dtype_);
    if (options.kv_residual_tokens > (std::uint64_t{1} << 24) ||
        residual_bytes >= options.kv_budget_bytes)
      throw std::invalid_argument(
          "kv_residual_tokens " + std::to_string(options.kv_residual_tokens) + " take " +
          std::to_string(residual_bytes) + " bytes, not less than kv_budget_bytes " +
          std::to_string(options.kv_budget_bytes));
    const auto capacity =
        static_cast<std::int64_t>((options.kv_budget_bytes - residual_bytes) / per_token);
    if (capacity < 1)
      throw std::invalid_argument(
          "kv_budget_bytes " + std::to_string(options.kv_budget_bytes) +
          " holds no token (one token needs " + std::to_string(per_token) + " bytes" +
          (residual > 0 ? " beside the residual copies)" : ")"));
    // The host tier: the same rows in its own format, in host memory.
    auto host_format = make_kv_format(
        options.kv_host_dtype.empty() ? format->name() : options.kv_host_dtype, dtype_);
    const auto host_per_token =
        host_format->bytes_per_token(c.num_layers, c.num_kv_heads, c.head_dim);
    const auto host_rows =
        static_cast<std::int64_t>(options.kv_host_budget_bytes / host_per_token);
    if (host_rows > 0)
      host_kv_ = std::make_unique<kv_storage>(
          std::move(host_format), dtype_, c.num_layers, host_rows, c.num_kv_heads,
          c.head_dim, at::TensorOptions(at::kCPU).pinned_memory(device_.is_cuda()));
    slots_ = std::make_unique<kv_slots>(capacity, host_rows);
    info_.kv_dtype = format->name();
    kv_ = std::make_unique<kv_storage>(std::move(format), dtype_, c.num_layers, capacity,
                                       c.num_kv_heads, c.head_dim, device_, residual);
    if (const auto how = decode_graphs_mode(options, device_))
      graphs_ = std::make_unique<decode_graphs>(*model_, *kv_, device_, dtype_, *how);
    if (options.direct_forward && device_.is_cpu() && dtype_ == at::kFloat)
      if (const auto* llama = dynamic_cast<const llama_model*>(model_.get()))
        direct_ = std::make_unique<direct_llama_forward>(*llama);
    info_.name = to_string(c.arch) + " " + ckpt.source;
    info_.architecture = to_string(c.arch);
    info_.vocab_size = c.vocab_size;
    info_.context_length = c.context_length;
    info_.kv_window = c.sliding_window;
    info_.dtype = options.dtype;
    info_.weight_dtype = weights ? weight_format_name(*weights) : options.dtype;
    info_.weight_bytes = model_->weight_bytes();
    info_.step_weight_bytes = info_.weight_bytes - model_->lookup_table_bytes();
    info_.weight_kernels = weight_kernels_of(weights);
    info_.fingerprint = checkpoint_fingerprint(ckpt);
    info_.kv_bytes_per_token = per_token;
    info_.kv_keep_bytes =
        static_cast<std::uint64_t>(capacity * keep_eighths / 8) * per_token;
    // The cache counts a token's bytes as on the device (kv_bytes_per_token) in either
    // tier, so the host tier it may fill is its rows at that cost.
    info_.kv_host_keep_bytes = static_cast<std::uint64_t>(host_rows) * per_token;
  }

  const model_info& info() const override { return info_; }

  pass_result run(const pass_request& request) override {
    return start(request)->finish();
  }

  /// Queues the pass's work and starts its rows' copy to the host. On the CPU the pass
  /// is computed before this returns, and answered too: the direct forward's rows live
  /// in its buffer only until its next pass.
  std::unique_ptr<started_pass> start(const pass_request& request) override {
    const auto started = std::chrono::steady_clock::now();
    profile_clock clock(profile_);
    if (threads_ > 0 && at::get_num_threads() != threads_)
      at::set_num_threads(threads_);
    c10::InferenceMode inference;
    const auto& items = request.items;
    std::vector<item_shape> shapes(items.size());
    for (std::size_t i = 0; i < items.size(); ++i)
      shapes[i] = check(i, items[i]);
    promote_prefixes(shapes);

    // Kept tokens get slots of their own (as many as there is room for); the others
    // borrow slots for this pass, so that every key is read from the storage itself.
    // Without room to lend, the pass packs its keys instead (Note [key sources]).
    // Kept slots stay taken until the pass finishes; borrowed ones go back when it is
    // queued, since a later pass that takes them writes them after it on the stream.
    auto kept = std::make_unique<slot_reservation>(*slots_);
    slot_reservation borrowed(*slots_);
    std::vector<std::vector<kv_slots::slot>> kept_slots(items.size());
    std::size_t unkept = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (items[i].keep_kv)
        kept_slots[i] =
            slots_->take(items[i].prefix, items[i].prefix_length, items[i].tokens.size());
      kept->add(kept_slots[i]);
      unkept += items[i].tokens.size() - kept_slots[i].size();
    }
    auto loan = slots_->take(no_kv, 0, unkept);
    const bool pooled = loan.size() == unkept;
    if (pooled) {
      borrowed.add(loan);
      auto next_loan = loan.begin();
      for (std::size_t i = 0; i < items.size(); ++i) {
        shapes[i].new_slots = kept_slots[i];
        while (shapes[i].new_slots.size() < items[i].tokens.size())
          shapes[i].new_slots.push_back(*next_loan++);
        to_rows(shapes[i].new_slots);
      }
    } else {
      slots_->give_back(loan);
    }
    clock.lap("check items, take KV slots");

    // Borrowed rows for a decode bucket's padding items, given back once it is queued.
    slot_reservation padding(*slots_);
    computed done;
    if (auto step = decode_step_of(items, shapes, pooled, padding)) {
      const auto n = static_cast<std::int64_t>(items.size());
      done = {graphs_->run(*step, clock), n, static_cast<std::int64_t>(step->keys.size()),
              n};
    } else {
      done = ragged(items, shapes, kept_slots, pooled, clock);
    }

    pass_result answer;
    answer.tokens_computed = static_cast<std::uint64_t>(done.tokens);
    answer.items.resize(items.size());
    std::vector<std::size_t> rows_per_item(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      rows_per_item[i] = items[i].rows.size();
      if (!items[i].keep_kv)
        continue;
      auto& kv = answer.items[i].kv;
      kv.assign(items[i].tokens.size(), no_kv);
      for (std::size_t j = 0; j < kept_slots[i].size(); ++j)
        kv[j] = slots_->handle(kept_slots[i][j]);
    }
    answer.matmul_flops =
        model_->matmul_flops(done.tokens, done.key_visits, done.answers);
    auto pass = std::make_unique<started_torch_pass>(
        std::move(answer), std::move(rows_per_item),
        static_cast<std::size_t>(info_.vocab_size), rows_to_host(done.rows),
        std::move(kept), profile_, started);
    if (!done.rows.is_cuda())
      return std::make_unique<finished_pass>(pass->finish());
    return pass;
  }

  void release_kv(const std::vector<kv_handle>& handles) override {
    for (const auto h : handles)
      slots_->release(h);
  }

  std::size_t demote_kv(const std::vector<kv_handle>& handles) override {
    if (!host_kv_)
      return 0;
    c10::InferenceMode inference;
    std::vector<std::int64_t> from, to;
    for (const auto h : handles)
      if (const auto moved = slots_->demote(h)) {
        from.push_back(moved->from);
        to.push_back(moved->to);
      }
    host_kv_->copy_rows(*kv_, from, to);
    return from.size();
  }

  std::size_t kv_entries() const override {
    return static_cast<std::size_t>(slots_->used());
  }

  void attach_profile(pass_profile* profile) override { profile_ = profile; }

  void add_adapter(const std::string& name, const lora_adapter_files& files) override {
    if (name.empty())
      throw std::invalid_argument("an adapter needs a name");
    if (adapters_.count(name) != 0)
      throw std::invalid_argument("adapter '" + name +
                                  "' is already loaded; remove it first");
    const auto adapter = parse_lora_adapter(files, model_->config(), public_name(info_));
    // Checked before anything is allocated: the budget is a hard limit.
    const auto bytes = lora_weights::bytes_for(adapter, dtype_);
    if (bytes > adapter_budget_bytes_ - adapter_bytes_)
      throw std::invalid_argument(
          "adapter '" + name + "' takes " + std::to_string(bytes) + " bytes on " +
          device_.str() + ", and the adapters' budget of " +
          std::to_string(adapter_budget_bytes_) + " bytes has " +
          std::to_string(adapter_budget_bytes_ - adapter_bytes_) + " left");
    adapters_.emplace(name, std::make_unique<const lora_weights>(
                                adapter, model_->config(), device_, dtype_));
    adapter_bytes_ += bytes;
  }

  bool remove_adapter(const std::string& name) override {
    const auto it = adapters_.find(name);
    if (it == adapters_.end())
      return false;
    adapter_bytes_ -= it->second->bytes();
    adapters_.erase(it);
    return true;
  }

private:
  /// The pass as a decode step through a bucket (decode_graphs.hpp), when it is one:
  /// pooled, every item one new token, one row and no adapter, a bucket that holds it,
  /// and rows to borrow for its padding items (taken into `padding`). Else nullopt.
  std::optional<decode_step> decode_step_of(const std::vector<pass_item>& items,
                                            const std::vector<item_shape>& shapes,
                                            bool pooled, slot_reservation& padding) {
    if (!graphs_ || !pooled)
      return std::nullopt;
    decode_step step;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& item = items[i];
      if (item.tokens.size() != 1 || item.rows.size() != 1 || !item.adapter.empty())
        return std::nullopt;
      const auto& shape = shapes[i];
      step.tokens.push_back(item.tokens[0]);
      step.positions.push_back(item.prefix_length);
      step.keys.insert(step.keys.end(), shape.prefix_slots.begin(),
                       shape.prefix_slots.end());
      step.keys.push_back(shape.new_slots[0]);
      step.key_counts.push_back(static_cast<std::int64_t>(shape.prefix_slots.size()) + 1);
      step.stores.push_back(shape.new_slots[0]);
    }
    const auto pad = graphs_->padding_for(
        items.size(), *std::max_element(step.key_counts.begin(), step.key_counts.end()));
    if (!pad)
      return std::nullopt;
    auto rows = slots_->take(no_kv, 0, *pad);
    padding.add(rows);
    if (rows.size() != *pad)
      return std::nullopt;
    to_rows(rows);
    step.stores.insert(step.stores.end(), rows.begin(), rows.end());
    return step;
  }

  /// The pass as it comes: its items' new tokens packed, attention by groups
  /// (pass_layout.hpp), through the direct forward where it runs, else ATen's.
  computed ragged(const std::vector<pass_item>& items,
                  const std::vector<item_shape>& shapes,
                  const std::vector<std::vector<kv_slots::slot>>& kept_slots, bool pooled,
                  profile_clock& clock) {
    const auto layout = build_pass_layout(shapes, pooled ? kv_->zero_row() : -1,
                                          model_->config().sliding_window);

    std::vector<std::int64_t> tokens, rows, store_rows, store_slots;
    lora_spans adapted;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto offset = layout.item_offset[i];
      if (!items[i].adapter.empty()) {
        const auto* weights = adapters_.at(items[i].adapter).get();
        const auto end = offset + static_cast<std::int64_t>(items[i].tokens.size());
        // Neighbours under one adapter make one span: one product for all their rows.
        if (!adapted.empty() && adapted.back().weights == weights &&
            adapted.back().end == offset)
          adapted.back().end = end;
        else
          adapted.push_back({offset, end, weights});
      }
      tokens.insert(tokens.end(), items[i].tokens.begin(), items[i].tokens.end());
      for (const auto r : items[i].rows)
        rows.push_back(offset + r);
      if (pooled)
        store_slots.insert(store_slots.end(), shapes[i].new_slots.begin(),
                           shapes[i].new_slots.end());
      else
        for (const auto s : kept_slots[i])
          store_slots.push_back(slots_->row_of(s));
      const auto written = pooled ? shapes[i].new_slots.size() : kept_slots[i].size();
      for (std::size_t j = 0; j < written; ++j)
        store_rows.push_back(offset + static_cast<std::int64_t>(j));
    }
    const auto on_device = to_device(layout, device_, dtype_);
    kv_->begin_pass(store_slots);
    clock.lap("layout");
    const auto answers = static_cast<std::int64_t>(rows.size());
    at::Tensor answer_rows;
    if (direct_ && pooled) {
      answer_rows =
          at::from_blob(const_cast<float*>(direct_->forward(
                            tokens, on_device, *kv_, store_slots, rows, adapted, clock)),
                        {answers, model_->config().vocab_size});
    } else {
      const pass_kv kv{kv_.get(), pooled, index_tensor(store_rows, device_),
                       index_tensor(store_slots, device_),
                       index_tensor(layout.prefix_slots, device_)};
      answer_rows = model_->forward(index_tensor(tokens, device_), on_device, kv,
                                    index_tensor(rows, device_), adapted);
      clock.lap("ATen forward");
    }
    std::int64_t key_visits = 0;
    for (const auto& g : layout.groups)
      for (std::size_t r = 0; r < g.key_limit.size(); ++r)
        key_visits += g.key_limit[r] - g.key_start[r];
    return {answer_rows, layout.packed_rows, key_visits, answers};
  }

  /// Storage rows of taken slots, in place.
  void to_rows(std::vector<kv_slots::slot>& slots) const {
    for (auto& s : slots)
      s = slots_->row_of(s);
  }

  /// Moves the host-tier KV the items' prefixes read back to the device, then turns
  /// their prefix slots into device rows. Throws when the device has no free row for
  /// it (the cache keeps room for promotions in its device budget).
  void promote_prefixes(std::vector<item_shape>& shapes) {
    std::vector<std::int64_t> from, to;
    std::string problem;
    for (auto& shape : shapes) {
      for (const auto s : shape.prefix_slots)
        if (slots_->where(s) == kv_slots::tier::host && problem.empty()) {
          if (const auto moved = slots_->promote(s)) {
            from.push_back(moved->from);
            to.push_back(moved->to);
          } else {
            problem = "no free device KV row to move host-tier KV back into";
          }
        }
      to_rows(shape.prefix_slots);
    }
    if (!from.empty())
      kv_->copy_rows(*host_kv_, from, to);
    if (!problem.empty())
      throw std::runtime_error(problem);
  }

  /// Refuses an item the model cannot compute; returns its shape for the layout.
  item_shape check(std::size_t index, const pass_item& item) const {
    const auto& c = model_->config();
    if (item.tokens.empty())
      fail_item(index, "no new tokens");
    for (const auto t : item.tokens)
      if (t < 0 || t >= c.vocab_size)
        fail_item(index, "token id " + std::to_string(t) + " is outside [0, " +
                             std::to_string(c.vocab_size) + ")");
    if (static_cast<std::int64_t>(item.prefix_length + item.tokens.size()) >
        c.context_length)
      fail_item(index,
                "sequence of " + std::to_string(item.prefix_length + item.tokens.size()) +
                    " tokens exceeds the context of " + std::to_string(c.context_length));
    for (std::size_t r = 0; r < item.rows.size(); ++r)
      if (item.rows[r] >= item.tokens.size() ||
          (r > 0 && item.rows[r] <= item.rows[r - 1]))
        fail_item(index, "rows must be ascending indices into the new tokens");
    if (item.prefix == no_kv && item.prefix_length != 0)
      fail_item(index, "prefix_length without a prefix KV handle");
    if (!item.adapter.empty() && adapters_.count(item.adapter) == 0)
      fail_item(index, "no adapter '" + item.adapter + "' is loaded");
    item_shape shape;
    shape.new_tokens = static_cast<std::int64_t>(item.tokens.size());
    if (item.prefix != no_kv) {
      // A sliding window reads the last W-1 prefix positions only: older KV may be gone.
      const auto window = c.sliding_window;
      const auto newest =
          window > 0 ? static_cast<std::uint32_t>(window - 1) : UINT32_MAX;
      shape.prefix_slots = slots_->chain(item.prefix, item.prefix_length, newest);
      shape.prefix_start = static_cast<std::int64_t>(item.prefix_length) -
                           static_cast<std::int64_t>(shape.prefix_slots.size());
    }
    return shape;
  }

  at::Device device_;
  at::ScalarType dtype_;
  int threads_;
  std::unique_ptr<transformer> model_;
  std::unique_ptr<direct_llama_forward> direct_; // float32 Llama on the CPU, else null
  std::unique_ptr<kv_slots> slots_;
  std::unique_ptr<kv_storage> kv_;
  std::unique_ptr<kv_storage> host_kv_;   // the host tier; null: none
  std::unique_ptr<decode_graphs> graphs_; // decode passes in buckets; null: ragged
  model_info info_;
  pass_profile* profile_ = nullptr;
  std::map<std::string, std::unique_ptr<const lora_weights>> adapters_; // by name
  std::uint64_t adapter_budget_bytes_;
  std::uint64_t adapter_bytes_ = 0; // what adapters_ holds
};

} // namespace

std::string decode_graphs_problem(const std::string& value) {
  if (value == "auto" || value == "off" || value == "eager")
    return "";
  return "unknown decode_graphs '" + value + "' (known: auto, off, eager)";
}

model_config served_config(model_config config, const torch_options& options) {
  const auto asked = options.max_context_length;
  if (asked == 0)
    return config;
  const auto model = static_cast<std::uint64_t>(config.context_length);
  if (asked > model && config.sliding_window == 0)
    throw std::invalid_argument(
        "max_context_length " + std::to_string(asked) +
        " exceeds the model's context of " + std::to_string(model) +
        "; only a sliding-window model may serve longer sequences");
  if (asked > (std::uint64_t{1} << 24))
    throw std::invalid_argument("max_context_length " + std::to_string(asked) +
                                " is out of range (at most 16777216)");
  config.context_length = static_cast<std::int64_t>(asked);
  return config;
}

std::unique_ptr<backend_i> make_torch_backend(const checkpoint& ckpt,
                                              const std::string& device,
                                              const torch_options& options) {
  return std::make_unique<torch_backend>(ckpt, device, options);
}

} // namespace canopy::backends
