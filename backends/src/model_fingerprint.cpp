#include <canopy/backends/model_fingerprint.hpp>

#include <xxhash.h>

#include <cstdio>
#include <memory>
#include <sstream>

namespace canopy::backends {

namespace {

/// XXH3-128 over pieces fed one after another.
class fingerprint_hasher {
public:
  fingerprint_hasher() : state_(XXH3_createState(), &XXH3_freeState) {
    XXH3_128bits_reset(state_.get());
  }

  void add(const void* data, std::size_t bytes) {
    XXH3_128bits_update(state_.get(), data, bytes);
  }
  /// A string with its length first, so that consecutive strings cannot run together.
  void add(const std::string& text) {
    const std::uint64_t n = text.size();
    add(&n, sizeof n);
    add(text.data(), text.size());
  }

  std::string hex() const {
    const XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    char out[33];
    std::snprintf(out, sizeof out, "%016llx%016llx",
                  static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return out;
  }

private:
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
};

/// Every field of the config that takes part in the arithmetic, as text.
std::string canonical_config(const model_config& c) {
  std::ostringstream out;
  out.precision(17);
  out << to_string(c.arch) << ' ' << c.hidden_size << ' ' << c.intermediate_size << ' '
      << c.num_layers << ' ' << c.num_heads << ' ' << c.num_kv_heads << ' ' << c.head_dim
      << ' ' << c.vocab_size << ' ' << c.context_length << ' ' << c.norm_eps << ' '
      << c.rope_theta << ' ' << static_cast<int>(c.rope) << ' ' << c.tied_embeddings
      << ' ' << static_cast<int>(c.scaling.type) << ' ' << c.scaling.factor << ' '
      << c.scaling.low_freq_factor << ' ' << c.scaling.high_freq_factor << ' '
      << c.scaling.original_context << ' ' << c.qkv_bias << ' ' << c.qk_norm << ' '
      << c.sliding_window;
  for (const double f : c.scaling.frequency_factors)
    out << ' ' << f;
  return out.str();
}

} // namespace

std::string checkpoint_fingerprint(const checkpoint& ckpt) {
  fingerprint_hasher h;
  h.add(canonical_config(ckpt.config));
  for (const auto& [name, view] : ckpt.tensors) { // std::map: name order
    h.add(name);
    h.add(to_string(view.dtype));
    for (const std::int64_t d : view.shape)
      h.add(&d, sizeof d);
    h.add(view.data, byte_size(view));
  }
  return h.hex();
}

std::string mock_fingerprint(const mock_options& options) {
  fingerprint_hasher h;
  h.add(std::string("mock"));
  h.add(&options.vocab_size, sizeof options.vocab_size);
  h.add(&options.context_length, sizeof options.context_length);
  h.add(&options.seed, sizeof options.seed);
  return h.hex();
}

} // namespace canopy::backends
