#include <canopy/backends/checkpoints/checkpoint_schema.hpp>

#include "checkpoints/message_text.hpp"

#include <cmath>
#include <set>

namespace canopy::backends {

namespace {

// Far above any real model, low enough that every product of two or three sizes
// (V*D, L*F*D, ...) fits in int64 and a crafted config cannot overflow a shape.
constexpr std::int64_t max_size = std::int64_t{1} << 31;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw checkpoint_error(source + ": " + what);
}

void require_size(const std::string& source, const char* name, std::int64_t value) {
  if (value <= 0 || value > max_size)
    fail(source, std::string(name) + " " + std::to_string(value) +
                     " is out of range (1.." + std::to_string(max_size) + ")");
}

void require_token(const std::string& source, const char* name, std::int64_t id,
                   std::int64_t vocab) {
  if (id < -1 || id >= vocab)
    fail(source, std::string(name) + " " + std::to_string(id) +
                     " is outside the vocabulary (vocab_size " + std::to_string(vocab) +
                     ")");
}

std::string layer_prefix(architecture arch, std::int64_t layer) {
  return (llama_style(arch) ? "model.layers." : "transformer.h.") +
         std::to_string(layer) + ".";
}

bool positive(double x) {
  return x > 0 && std::isfinite(x);
}

void validate_rope_scaling(const rope_scaling& r, const std::string& source) {
  if (r.type == rope_scaling::kind::none)
    return;
  if (!positive(r.factor))
    fail(source,
         "rope_scaling factor " + std::to_string(r.factor) + " is not a positive number");
  if (r.type == rope_scaling::kind::per_frequency)
    for (const double f : r.frequency_factors)
      if (!positive(f))
        fail(source,
             "rope frequency factor " + std::to_string(f) + " is not a positive number");
  if (r.type != rope_scaling::kind::llama3)
    return;
  // HF's llama3 rescaling divides by high - low and by both factors.
  if (!positive(r.low_freq_factor) || !positive(r.high_freq_factor) ||
      !(r.high_freq_factor > r.low_freq_factor))
    fail(source, "rope_scaling low_freq_factor " + std::to_string(r.low_freq_factor) +
                     " and high_freq_factor " + std::to_string(r.high_freq_factor) +
                     " must be positive with high > low");
  require_size(source, "rope_scaling original_max_position_embeddings",
               r.original_context);
}

} // namespace

std::string describe_config(const model_config& c) {
  std::string out = to_string(c.arch) + " (hidden " + std::to_string(c.hidden_size) +
                    ", intermediate " + std::to_string(c.intermediate_size) +
                    ", layers " + std::to_string(c.num_layers) + ", heads " +
                    std::to_string(c.num_heads);
  if (llama_style(c.arch))
    out += ", kv_heads " + std::to_string(c.num_kv_heads) + ", head_dim " +
           std::to_string(c.head_dim);
  if (c.sliding_window > 0)
    out += ", sliding_window " + std::to_string(c.sliding_window);
  out += ", vocab " + std::to_string(c.vocab_size) + ", context " +
         std::to_string(c.context_length) + (c.tied_embeddings ? ", tied)" : ", untied)");
  return out;
}

void validate_model_config(const model_config& c, const std::string& source) {
  require_size(source, "hidden_size", c.hidden_size);
  require_size(source, "intermediate_size", c.intermediate_size);
  require_size(source, "num_layers", c.num_layers);
  require_size(source, "num_heads", c.num_heads);
  require_size(source, "num_kv_heads", c.num_kv_heads);
  require_size(source, "head_dim", c.head_dim);
  require_size(source, "vocab_size", c.vocab_size);
  require_size(source, "context_length", c.context_length);
  // Layers are bounded much lower: L * F * D must fit comfortably.
  if (c.num_layers > 65536)
    fail(source, "num_layers " + std::to_string(c.num_layers) + " is out of range");
  if (c.num_heads % c.num_kv_heads != 0)
    fail(source, "num_heads " + std::to_string(c.num_heads) +
                     " is not a multiple of num_kv_heads " +
                     std::to_string(c.num_kv_heads));
  if (c.num_heads * c.head_dim > max_size)
    fail(source, "num_heads * head_dim is out of range");
  if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps))
    fail(source, "norm eps " + std::to_string(c.norm_eps) + " is not a positive number");
  if (c.sliding_window < 0)
    fail(source, "sliding_window " + std::to_string(c.sliding_window) + " is negative");
  if (llama_style(c.arch)) {
    validate_rope_scaling(c.scaling, source);
    const auto& ff = c.scaling.frequency_factors;
    if (c.scaling.type == rope_scaling::kind::per_frequency &&
        static_cast<std::int64_t>(ff.size()) * 2 != c.head_dim)
      fail(source, "rope frequency factors: " + std::to_string(ff.size()) +
                       " for head_dim " + std::to_string(c.head_dim) + " (one per pair)");
    if (c.head_dim % 2 != 0)
      fail(source, "head_dim " + std::to_string(c.head_dim) +
                       " is odd (RoPE rotates pairs of dimensions)");
    if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
      fail(source,
           "rope_theta " + std::to_string(c.rope_theta) + " is not a positive number");
  } else {
    if (c.qkv_bias || c.qk_norm || c.sliding_window > 0 ||
        c.scaling.type != rope_scaling::kind::none)
      fail(source, "gpt2 has no q/k/v biases of this kind, q/k norms, sliding window or "
                   "rope scaling");
    if (c.num_kv_heads != c.num_heads)
      fail(source, "gpt2 has no grouped-query attention (num_kv_heads " +
                       std::to_string(c.num_kv_heads) + " != num_heads " +
                       std::to_string(c.num_heads) + ")");
    if (c.head_dim * c.num_heads != c.hidden_size)
      fail(source, "hidden_size " + std::to_string(c.hidden_size) +
                       " is not num_heads * head_dim (" + std::to_string(c.num_heads) +
                       " * " + std::to_string(c.head_dim) + ")");
  }
  require_token(source, "bos_token_id", c.bos_token_id, c.vocab_size);
  require_token(source, "eos_token_id", c.eos_token_id, c.vocab_size);
}

std::vector<tensor_spec> expected_tensors(const model_config& c) {
  const std::int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  std::vector<tensor_spec> out;
  if (llama_style(c.arch)) {
    const std::int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    out.push_back({"model.embed_tokens.weight", {V, D}});
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string p = layer_prefix(c.arch, layer);
      out.push_back({p + "self_attn.q_proj.weight", {q, D}});
      out.push_back({p + "self_attn.k_proj.weight", {kv, D}});
      out.push_back({p + "self_attn.v_proj.weight", {kv, D}});
      out.push_back({p + "self_attn.o_proj.weight", {D, q}});
      if (c.qkv_bias) {
        out.push_back({p + "self_attn.q_proj.bias", {q}});
        out.push_back({p + "self_attn.k_proj.bias", {kv}});
        out.push_back({p + "self_attn.v_proj.bias", {kv}});
      }
      if (c.qk_norm) {
        out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
        out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
      }
      out.push_back({p + "mlp.gate_proj.weight", {F, D}});
      out.push_back({p + "mlp.up_proj.weight", {F, D}});
      out.push_back({p + "mlp.down_proj.weight", {D, F}});
      out.push_back({p + "input_layernorm.weight", {D}});
      out.push_back({p + "post_attention_layernorm.weight", {D}});
    }
    out.push_back({"model.norm.weight", {D}});
  } else {
    out.push_back({"transformer.wte.weight", {V, D}});
    out.push_back({"transformer.wpe.weight", {c.context_length, D}});
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string p = layer_prefix(c.arch, layer);
      out.push_back({p + "ln_1.weight", {D}});
      out.push_back({p + "ln_1.bias", {D}});
      out.push_back({p + "attn.c_attn.weight", {D, 3 * D}});
      out.push_back({p + "attn.c_attn.bias", {3 * D}});
      out.push_back({p + "attn.c_proj.weight", {D, D}});
      out.push_back({p + "attn.c_proj.bias", {D}});
      out.push_back({p + "ln_2.weight", {D}});
      out.push_back({p + "ln_2.bias", {D}});
      out.push_back({p + "mlp.c_fc.weight", {D, F}});
      out.push_back({p + "mlp.c_fc.bias", {F}});
      out.push_back({p + "mlp.c_proj.weight", {F, D}});
      out.push_back({p + "mlp.c_proj.bias", {D}});
    }
    out.push_back({"transformer.ln_f.weight", {D}});
    out.push_back({"transformer.ln_f.bias", {D}});
  }
  if (!c.tied_embeddings)
    out.push_back({"lm_head.weight", {V, D}});
  return out;
}

void check_tensor_schema(const model_config& config,
                         const std::map<std::string, tensor_view>& tensors,
                         const std::string& source,
                         const std::map<std::string, std::string>& tensor_files) {
  auto file_of = [&](const std::string& name) -> const std::string& {
    auto it = tensor_files.find(name);
    return it == tensor_files.end() ? source : it->second;
  };
  // Every problem is collected, so one run names all that is wrong with a file
  // (a config with the wrong layer count shows as both missing and extra tensors).
  std::vector<std::string> problems;
  std::set<std::string> expected_names;
  for (const tensor_spec& spec : expected_tensors(config)) {
    expected_names.insert(spec.name);
    auto it = tensors.find(spec.name);
    if (it == tensors.end())
      problems.push_back(source + ": missing tensor " + detail::quote(spec.name) +
                         " (expected shape " + detail::shape_text(spec.shape) + ")");
    else if (it->second.shape != spec.shape)
      problems.push_back(file_of(spec.name) + ": tensor " + detail::quote(spec.name) +
                         " has shape " + detail::shape_text(it->second.shape) +
                         " but the config implies " + detail::shape_text(spec.shape));
    else if (it->second.data == nullptr && byte_size(it->second) > 0)
      problems.push_back(file_of(spec.name) + ": tensor " + detail::quote(spec.name) +
                         " has no data");
  }
  for (const auto& entry : tensors)
    if (expected_names.count(entry.first) == 0)
      problems.push_back(file_of(entry.first) + ": unexpected tensor " +
                         detail::quote(entry.first) + " (shape " +
                         detail::shape_text(entry.second.shape) + ")");
  if (problems.empty())
    return;
  constexpr std::size_t shown = 8;
  std::string message;
  for (std::size_t i = 0; i < problems.size() && i < shown; ++i)
    message += (i ? "; " : "") + problems[i];
  if (problems.size() > shown)
    message += "; and " + std::to_string(problems.size() - shown) + " more problems";
  throw checkpoint_error(message + " [config: " + describe_config(config) + "]");
}

void check_checkpoint(const checkpoint& ckpt) {
  validate_model_config(ckpt.config, ckpt.source);
  check_tensor_schema(ckpt.config, ckpt.tensors, ckpt.source);
}

} // namespace canopy::backends
