#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>

#include "checkpoints/checked_math.hpp"
#include "checkpoints/mix64.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::backends {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensor views are little-endian: owned float buffers need a LE host");

constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ULL; // splitmix64's increment
constexpr double two_pi = 6.283185307179586476925286766559;
constexpr std::uint64_t max_parameters = std::uint64_t{1} << 31;

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : text)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return h;
}

/// Output k of a splitmix64 generator whose state starts at `key`.
std::uint64_t splitmix(std::uint64_t key, std::uint64_t k) {
  return detail::mix64(key + (k + 1) * golden_gamma);
}

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("synthetic_spec: " + what);
}

void require_positive(const char* field, std::int64_t value) {
  if (value <= 0)
    invalid(std::string(field) + " must be positive (got " + std::to_string(value) + ")");
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// value = mean + std * N(0,1) for the tensor `name` (see the header for the table).
struct init {
  double mean;
  double std;
};

init init_for(architecture arch, const std::string& name, double s) {
  const bool final_norm =
      name == "model.norm.weight" || name == "transformer.ln_f.weight";
  if (final_norm)
    return {10.0 * s, 1.0 * s}; // 10 s * (1 + N(0, 0.1))
  if (name == "transformer.ln_f.bias")
    return {0.0, 0.5};
  if (ends_with(name, "layernorm.weight") || ends_with(name, "ln_1.weight") ||
      ends_with(name, "ln_2.weight"))
    return {1.0, 0.1};
  if (name == "model.embed_tokens.weight" || name == "transformer.wte.weight" ||
      name == "lm_head.weight")
    return {0.0, 0.05};
  if (name == "transformer.wpe.weight")
    return {0.0, 0.03};
  if (ends_with(name, ".bias"))
    return {0.0, 0.05};
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight") ||
      ends_with(name, "c_proj.weight"))
    return {0.0, 0.1 * s};
  (void)arch; // q/k/v, gate/up, c_attn, c_fc
  return {0.0, 0.2 * s};
}

model_config config_of(const synthetic_spec& spec) {
  model_config c;
  c.arch = spec.arch;
  c.hidden_size = spec.hidden;
  c.intermediate_size = spec.intermediate > 0
                            ? spec.intermediate
                            : default_intermediate_size(spec.arch, spec.hidden);
  c.num_layers = spec.layers;
  c.num_heads = spec.heads;
  c.num_kv_heads = spec.kv_heads > 0 ? spec.kv_heads : spec.heads;
  c.head_dim = spec.hidden / spec.heads;
  c.vocab_size = spec.vocab;
  c.context_length = spec.context;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope = rope_pairs::rotate_half;
  c.tied_embeddings = true;
  if (spec.arch == architecture::llama) {
    c.bos_token_id = spec.vocab > 2 ? 1 : -1;
    c.eos_token_id = spec.vocab > 2 ? 2 : -1;
  } else {
    c.bos_token_id = c.eos_token_id = spec.vocab - 1;
  }
  return c;
}

void validate(const synthetic_spec& spec) {
  if (spec.arch != architecture::llama && spec.arch != architecture::gpt2)
    invalid("synthetic checkpoints are llama or gpt2, not " + to_string(spec.arch));
  require_positive("hidden", spec.hidden);
  require_positive("layers", spec.layers);
  require_positive("heads", spec.heads);
  require_positive("vocab", spec.vocab);
  require_positive("context", spec.context);
  if (spec.kv_heads < 0)
    invalid("kv_heads must be 0 (= heads) or positive (got " +
            std::to_string(spec.kv_heads) + ")");
  if (spec.intermediate < 0)
    invalid("intermediate must be 0 (default) or positive (got " +
            std::to_string(spec.intermediate) + ")");
  if (spec.hidden % spec.heads != 0)
    invalid("hidden " + std::to_string(spec.hidden) + " is not divisible by heads " +
            std::to_string(spec.heads));
  const std::int64_t kv = spec.kv_heads > 0 ? spec.kv_heads : spec.heads;
  if (spec.heads % kv != 0)
    invalid("heads " + std::to_string(spec.heads) + " is not a multiple of kv_heads " +
            std::to_string(kv));
  if (spec.arch == architecture::gpt2 && kv != spec.heads)
    invalid("gpt2 has no grouped-query attention: kv_heads must be 0 or heads");
  if (spec.arch == architecture::llama && (spec.hidden / spec.heads) % 2 != 0)
    invalid("head_dim hidden / heads = " + std::to_string(spec.hidden / spec.heads) +
            " is odd (RoPE rotates pairs)");
  if (spec.layers > 4096)
    invalid("layers " + std::to_string(spec.layers) +
            " is more than a test model's 4096");
  // Each size alone is bounded before the parameter count, so the products below
  // cannot overflow.
  for (std::int64_t size : {spec.hidden, spec.layers, spec.vocab, spec.context,
                            spec.intermediate, spec.heads})
    if (size > (std::int64_t{1} << 24))
      invalid("a size above 2^24 is not a test model (got " + std::to_string(size) + ")");
}

/// The key of one tensor's stream: name and seed both fully mixed in.
std::uint64_t stream_key(std::uint64_t seed, std::string_view stream) {
  return detail::mix64(seed ^ detail::mix64(fnv1a(stream)));
}

/// Box-Muller on outputs 2p and 2p+1: elements 2p and 2p+1 of the stream.
struct normal_pair {
  double first, second;
};

normal_pair normal_pair_at(std::uint64_t key, std::uint64_t pair) {
  constexpr double unit = 1.0 / 9007199254740992.0; // 2^-53
  // u1 in (0, 1] so the log is finite; u2 in [0, 1).
  const double u1 = static_cast<double>((splitmix(key, 2 * pair) >> 11) + 1) * unit;
  const double u2 = static_cast<double>(splitmix(key, 2 * pair + 1) >> 11) * unit;
  const double r = std::sqrt(-2.0 * std::log(u1));
  return {r * std::cos(two_pi * u2), r * std::sin(two_pi * u2)};
}

} // namespace

std::int64_t default_intermediate_size(architecture arch, std::int64_t hidden) {
  if (arch == architecture::gpt2)
    return 4 * hidden;
  constexpr std::int64_t multiple_of = 32;
  const std::int64_t f = 8 * hidden / 3;
  return (f + multiple_of - 1) / multiple_of * multiple_of;
}

double synthetic_normal(std::uint64_t seed, std::string_view stream,
                        std::uint64_t index) {
  const normal_pair z = normal_pair_at(stream_key(seed, stream), index / 2);
  return index % 2 == 0 ? z.first : z.second;
}

model_config synthetic_config(const synthetic_spec& spec) {
  validate(spec);
  return config_of(spec);
}

checkpoint make_synthetic_checkpoint(const synthetic_spec& spec) {
  validate(spec);
  checkpoint out;
  out.config = config_of(spec);
  out.source = "synthetic " + to_string(spec.arch) + " seed " + std::to_string(spec.seed);
  validate_model_config(out.config, out.source);
  const std::vector<tensor_spec> specs = expected_tensors(out.config);

  std::optional<std::uint64_t> parameters = 0;
  for (const tensor_spec& t : specs)
    if (auto n = detail::checked_product(t.shape); parameters && n)
      parameters = detail::checked_add(*parameters, *n);
    else
      parameters.reset();
  if (!parameters || *parameters > max_parameters)
    invalid((parameters ? std::to_string(*parameters) : std::string("over 2^64")) +
            " parameters is more than a test model's limit of " +
            std::to_string(max_parameters));

  const double s = std::sqrt(64.0 / static_cast<double>(spec.hidden));
  auto buffers = std::make_shared<std::vector<std::vector<float>>>();
  buffers->reserve(specs.size());
  for (const tensor_spec& t : specs) {
    const init how = init_for(spec.arch, t.name, s);
    const std::uint64_t key = stream_key(spec.seed, t.name);
    std::vector<float>& values = buffers->emplace_back(
        static_cast<std::size_t>(*detail::checked_product(t.shape)));
    for (std::size_t i = 0; i < values.size(); i += 2) {
      const normal_pair z = normal_pair_at(key, i / 2);
      values[i] = static_cast<float>(how.mean + how.std * z.first);
      if (i + 1 < values.size())
        values[i + 1] = static_cast<float>(how.mean + how.std * z.second);
    }
    out.tensors.emplace(t.name,
                        tensor_view{weight_dtype::f32, t.shape,
                                    reinterpret_cast<const std::byte*>(values.data())});
  }
  out.storage = std::move(buffers);
  return out;
}

} // namespace canopy::backends
