#include <canopy/backends/mock_backend.hpp>

#include <canopy/backends/model_fingerprint.hpp>
#include <canopy/backends/sequence_hash.hpp>

#include "checkpoints/mix64.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>

namespace canopy::backends {

namespace {

// The logit of entry v is the sum of the four 16-bit lanes of mix64(hash + v * step):
// an integer lattice index k in [0, 2 * lattice_half], Irwin-Hall distributed (close to
// Gaussian), mapped to (k - lattice_half) * lattice_step. The step makes sigma 3 nats,
// so rows are peaked enough for sampling tests to see a shape (entropy about 3.6 nats
// at vocab 512), and bounds every logit to +-10.4, so exp can neither overflow nor
// underflow and log_softmax needs no max subtraction.
constexpr std::uint64_t row_counter_step = 0xC2B2AE3D27D4EB4FULL;
constexpr std::int32_t lattice_half = 2 * 0xFFFF;
constexpr double lattice_step = 3.0 * 1.7320508075688772 / 65536.0; // 3 / lane-sum sigma

// exp of a lattice logit as hi[k >> 8] * lo[k & 0xFF]: exact to double
// rounding, and two lookups instead of a std::exp per entry, which would cost more
// than the rest of the row together.
struct exp_tables {
  std::array<double, (2 * lattice_half >> 8) + 1> hi{};
  std::array<double, 256> lo{};

  exp_tables() {
    for (std::size_t i = 0; i < hi.size(); ++i)
      hi[i] = std::exp((static_cast<double>(i << 8) - lattice_half) * lattice_step);
    for (std::size_t i = 0; i < lo.size(); ++i)
      lo[i] = std::exp(static_cast<double>(i) * lattice_step);
  }
};

/// Writes the row of the sequence whose hash is `hash` to out[0, vocab).
void fill_logprobs(std::int64_t vocab, std::uint64_t hash, float* out) {
  static const exp_tables tables;
  double sum = 0.0;
  for (std::int64_t v = 0; v < vocab; ++v) {
    const std::uint64_t u =
        detail::mix64(hash + static_cast<std::uint64_t>(v) * row_counter_step);
    const auto k = static_cast<std::uint32_t>((u & 0xFFFF) + ((u >> 16) & 0xFFFF) +
                                              ((u >> 32) & 0xFFFF) + (u >> 48));
    sum += tables.hi[k >> 8] * tables.lo[k & 0xFF];
    out[v] = static_cast<float>(k); // exact: k < 2^24; turned into a log-prob below
  }
  const double log_sum = std::log(sum);
  for (std::int64_t v = 0; v < vocab; ++v)
    out[v] = static_cast<float>(
        (static_cast<double>(out[v]) - lattice_half) * lattice_step - log_sum);
}

void check_options(const mock_options& options) {
  if (options.vocab_size < 2)
    throw std::invalid_argument("mock backend: vocab_size must be at least 2 (got " +
                                std::to_string(options.vocab_size) + ")");
  // prefix_length is 32-bit, so a longer context could not be addressed.
  if (options.context_length < 1 ||
      options.context_length > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument(
        "mock backend: context_length must be in [1, 2^32) (got " +
        std::to_string(options.context_length) + ")");
  if (options.kv_window < 0 || options.kv_window > options.context_length)
    throw std::invalid_argument(
        "mock backend: kv_window must be in [0, context_length] (got " +
        std::to_string(options.kv_window) + ")");
  if (options.cost_per_pass.count() < 0 || options.cost_per_token.count() < 0)
    throw std::invalid_argument("mock backend: simulated costs must not be negative");
}

template <class Error>
[[noreturn]] void fail_item(std::size_t index, const std::string& problem) {
  throw Error("mock backend: pass item " + std::to_string(index) + ": " + problem);
}

class mock_backend final : public backend_i {
public:
  explicit mock_backend(const mock_options& options)
      : options_(options), info_{"mock",
                                 "mock",
                                 options.vocab_size,
                                 options.context_length,
                                 options.kv_window,
                                 "float32",
                                 "",
                                 mock_fingerprint(options),
                                 options.kv_bytes_per_token,
                                 0,
                                 0,
                                 "",
                                 0,
                                 0,
                                 ""} {}

  const model_info& info() const override { return info_; }

  pass_result run(const pass_request& request) override {
    const auto started = std::chrono::steady_clock::now();
    // Every item is checked before any is computed, so a failed pass makes no KV.
    std::vector<item_start> start_states;
    start_states.reserve(request.items.size());
    std::uint64_t tokens = 0;
    for (std::size_t i = 0; i < request.items.size(); ++i) {
      start_states.push_back(resolve(i, request.items[i]));
      tokens += request.items[i].tokens.size();
    }
    pass_result result;
    result.tokens_computed = tokens;
    result.items.reserve(request.items.size());
    for (std::size_t i = 0; i < request.items.size(); ++i)
      result.items.push_back(compute(request.items[i], start_states[i]));
    // The simulated device time covers the mock's own work instead of adding to it,
    // so a pass takes its modelled cost whatever the host's speed.
    const auto cost = options_.cost_per_pass +
                      options_.cost_per_token * static_cast<std::int64_t>(tokens);
    if (cost.count() > 0)
      std::this_thread::sleep_until(started + cost);
    return result;
  }

  void add_adapter(const std::string& name, const lora_adapter_files& files) override {
    if (name.empty())
      throw std::invalid_argument("mock backend: an adapter needs a name");
    if (!adapters_.emplace(name, mock_adapted(options_, files).seed).second)
      throw std::invalid_argument("mock backend: adapter '" + name +
                                  "' is already loaded; remove it first");
  }

  bool remove_adapter(const std::string& name) override {
    return adapters_.erase(name) != 0;
  }

  void release_kv(const std::vector<kv_handle>& handles) override {
    for (const kv_handle handle : handles)
      kv_.erase(handle);
  }

  std::size_t kv_entries() const override { return kv_.size(); }

private:
  // The entry carries the hash of its whole sequence, so a pass continuing from a
  // wrong handle gives a wrong row, as a real model would, and the position lets a
  // prefix_length that disagrees with the handle be caught.
  struct kv_entry {
    std::uint32_t position; // sequence length including this token
    std::uint64_t state;    // sequence hash including this token
    kv_handle parent;       // the previous token's entry; no_kv at the start
    std::uint64_t seed;     // of the adapter it was computed under (options' for none)
  };

  /// Where an item's hash continues from, and the seed of its adapter.
  struct item_start {
    std::uint64_t state;
    std::uint64_t seed;
  };

  /// Checks that the prefix's last W-1 entries (a window's reads) are still held,
  /// as a windowed model's pass needs them.
  void check_window(std::size_t index, const pass_item& item) const {
    auto h = kv_.at(item.prefix).parent;
    for (std::int64_t walked = 1; walked < options_.kv_window - 1 && h != no_kv;
         ++walked) {
      const auto entry = kv_.find(h);
      if (entry == kv_.end())
        fail_item<std::runtime_error>(
            index, "KV handle " + std::to_string(h) + " within the window of prefix " +
                       std::to_string(item.prefix) + " was released");
      h = entry->second.parent;
    }
  }

  /// Checks item `index` and returns the hash state it continues from.
  item_start resolve(std::size_t index, const pass_item& item) const {
    if (item.tokens.empty())
      fail_item<std::invalid_argument>(index, "no tokens");
    for (std::size_t j = 0; j < item.tokens.size(); ++j) {
      const token_id token = item.tokens[j];
      if (token < 0 || token >= options_.vocab_size)
        fail_item<std::invalid_argument>(
            index, "token " + std::to_string(token) + " at index " + std::to_string(j) +
                       " is outside the vocabulary [0, " +
                       std::to_string(options_.vocab_size) + ")");
    }
    for (std::size_t r = 0; r < item.rows.size(); ++r) {
      if (item.rows[r] >= item.tokens.size())
        fail_item<std::invalid_argument>(
            index, "row " + std::to_string(item.rows[r]) + " is out of range for " +
                       std::to_string(item.tokens.size()) + " tokens");
      if (r > 0 && item.rows[r] <= item.rows[r - 1])
        fail_item<std::invalid_argument>(index, "rows are not strictly ascending (" +
                                                    std::to_string(item.rows[r - 1]) +
                                                    " then " +
                                                    std::to_string(item.rows[r]) + ")");
    }
    std::uint64_t seed = options_.seed;
    if (!item.adapter.empty()) {
      const auto adapter = adapters_.find(item.adapter);
      if (adapter == adapters_.end())
        fail_item<std::invalid_argument>(index,
                                         "no adapter '" + item.adapter + "' is loaded");
      seed = adapter->second;
    }
    const std::uint64_t length = std::uint64_t{item.prefix_length} + item.tokens.size();
    if (length > static_cast<std::uint64_t>(options_.context_length))
      fail_item<std::invalid_argument>(index,
                                       "sequence of " + std::to_string(length) +
                                           " tokens exceeds the context length " +
                                           std::to_string(options_.context_length));
    if (item.prefix == no_kv) {
      if (item.prefix_length != 0)
        fail_item<std::invalid_argument>(index, "prefix_length " +
                                                    std::to_string(item.prefix_length) +
                                                    " without a prefix KV handle");
      return {sequence_hash_start(seed), seed};
    }
    const auto entry = kv_.find(item.prefix);
    if (entry == kv_.end())
      fail_item<std::runtime_error>(index, "unknown KV handle " +
                                               std::to_string(item.prefix) +
                                               " (released or never made)");
    if (entry->second.position != item.prefix_length)
      fail_item<std::runtime_error>(
          index, "prefix_length " + std::to_string(item.prefix_length) +
                     " disagrees with KV handle " + std::to_string(item.prefix) +
                     ", which ends at position " +
                     std::to_string(entry->second.position));
    // A real model would silently mix two adapters' KV; the mock says so.
    if (entry->second.seed != seed)
      fail_item<std::runtime_error>(index, "KV handle " + std::to_string(item.prefix) +
                                               " was computed under another adapter");
    if (options_.kv_window > 0)
      check_window(index, item);
    return {entry->second.state, seed};
  }

  /// Computes a checked item from the hash state of its prefix.
  item_output compute(const pass_item& item, item_start start) {
    std::uint64_t state = start.state;
    const auto vocab = static_cast<std::size_t>(options_.vocab_size);
    item_output out;
    out.logprobs.resize(item.rows.size() * vocab);
    if (item.keep_kv)
      out.kv.reserve(item.tokens.size());
    std::size_t row = 0;
    kv_handle parent = item.prefix;
    for (std::size_t j = 0; j < item.tokens.size(); ++j) {
      state = sequence_hash_step(state, item.tokens[j]);
      if (item.keep_kv) {
        const kv_handle handle = next_handle_++;
        const auto position = static_cast<std::uint32_t>(item.prefix_length + j + 1);
        kv_.emplace(handle, kv_entry{position, state, parent, start.seed});
        out.kv.push_back(handle);
        parent = handle;
      }
      if (row < item.rows.size() && item.rows[row] == j) {
        fill_logprobs(options_.vocab_size, state, out.logprobs.data() + row * vocab);
        ++row;
      }
    }
    return out;
  }

  mock_options options_;
  model_info info_;
  std::map<std::string, std::uint64_t> adapters_; // name -> mock_adapted's seed
  std::unordered_map<kv_handle, kv_entry> kv_;
  kv_handle next_handle_ = 1; // handles start at 1 and are never reused
};

} // namespace

std::vector<float> mock_logprobs(const mock_options& options,
                                 const cache::token_id* tokens, std::size_t n) {
  check_options(options);
  std::vector<float> row(static_cast<std::size_t>(options.vocab_size));
  fill_logprobs(options.vocab_size, sequence_hash(options.seed, tokens, n), row.data());
  return row;
}

mock_options mock_adapted(const mock_options& options, const lora_adapter_files& files) {
  // FNV-1a over both files, then mixed into the seed: any change of either file is
  // another adapter.
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const std::string* file : {&files.config_json, &files.weights}) {
    for (const char c : *file)
      h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
    h = detail::mix64(h);
  }
  mock_options out = options;
  out.seed = detail::mix64(options.seed ^ h);
  return out;
}

std::unique_ptr<backend_i> make_mock_backend(const mock_options& options) {
  check_options(options);
  return std::make_unique<mock_backend>(options);
}

} // namespace canopy::backends
