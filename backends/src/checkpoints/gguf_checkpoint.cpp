#include <canopy/backends/checkpoints/gguf_checkpoint.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/gguf_file.hpp>

#include "checkpoints/message_text.hpp"

#include <array>
#include <cstring>

namespace canopy::backends {

namespace {

/// The architectures served, by their GGUF names (llama.cpp's llama-arch.cpp).
constexpr std::array<enum_name<architecture>, 3> gguf_architectures{{
    {architecture::llama, "llama"},
    {architecture::qwen2, "qwen2"},
    {architecture::qwen3, "qwen3"},
}};

/// GGUF tensor name suffixes (after "blk.N.") and their HF names (after
/// "model.layers.N.").
constexpr std::array<std::pair<const char*, const char*>, 14> layer_names{{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
}};

/// The canonical name of a GGUF tensor; unknown names come back unchanged, so the
/// schema check names them as unexpected.
std::string canonical_name(const std::string& name) {
  if (name == "token_embd.weight")
    return "model.embed_tokens.weight";
  if (name == "output_norm.weight")
    return "model.norm.weight";
  if (name == "output.weight")
    return "lm_head.weight";
  if (name.rfind("blk.", 0) != 0)
    return name;
  const auto dot = name.find('.', 4);
  if (dot == std::string::npos)
    return name;
  const std::string layer = name.substr(4, dot - 4);
  const std::string rest = name.substr(dot + 1);
  for (const auto& [gguf, hf] : layer_names)
    if (rest == gguf)
      return "model.layers." + layer + "." + hf;
  return name;
}

std::optional<weight_dtype> dtype_of(const gguf_tensor& t) {
  if (t.data == nullptr)
    return std::nullopt;
  return value_of(weight_dtype_names, t.type_name);
}

/// Not a weight: the RoPE frequency factors, which the config takes.
constexpr const char* rope_freqs_tensor = "rope_freqs.weight";

const gguf_tensor* tensor_named(const gguf_file& file, const std::string& name) {
  for (const auto& t : file.tensors())
    if (t.name == name)
      return &t;
  return nullptr;
}

} // namespace

model_config gguf_model_config(const gguf_file& file) {
  const auto arch_name = file.string("general.architecture");
  if (!arch_name)
    file.fail("no general.architecture in the metadata");
  const auto arch = value_of(gguf_architectures, *arch_name);
  if (!arch)
    file.fail("architecture " + detail::quote(*arch_name) +
              " is not served (GGUF architectures served: llama, qwen2, qwen3)");
  const std::string a = *arch_name + ".";
  auto required = [&](const std::string& key) {
    const auto v = file.integer(a + key);
    if (!v)
      file.fail("no " + a + key + " in the metadata");
    return *v;
  };
  model_config c;
  c.arch = *arch;
  c.hidden_size = required("embedding_length");
  c.intermediate_size = required("feed_forward_length");
  c.num_layers = required("block_count");
  c.num_heads = required("attention.head_count");
  c.num_kv_heads = file.integer(a + "attention.head_count_kv").value_or(c.num_heads);
  c.head_dim = file.integer(a + "attention.key_length")
                   .value_or(c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.context_length = required("context_length");
  c.norm_eps = file.number(a + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  c.rope_theta = file.number(a + "rope.freq_base").value_or(10000.0);
  if (const auto rotary = file.integer(a + "rope.dimension_count");
      rotary && *rotary != c.head_dim)
    file.fail(a + "rope.dimension_count " + std::to_string(*rotary) +
              " differs from the head size " + std::to_string(c.head_dim) +
              " (partial rotary embeddings are not served)");
  if (const auto values = file.integer(a + "attention.value_length");
      values && *values != c.head_dim)
    file.fail(a + "attention.value_length " + std::to_string(*values) +
              " differs from the key length " + std::to_string(c.head_dim));
  const auto scaling = file.string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    c.scaling.type = rope_scaling::kind::linear;
    c.scaling.factor = file.number(a + "rope.scaling.factor").value_or(1.0);
  } else if (scaling != "none") {
    file.fail(a + "rope.scaling.type " + detail::quote(scaling) +
              " is not served (none or linear)");
  }
  if (const gguf_tensor* t = tensor_named(file, rope_freqs_tensor)) {
    // Llama 3.1's and 3.2's llama3 rope scaling, as llama.cpp's converter writes it.
    if (c.scaling.type != rope_scaling::kind::none)
      file.fail("tensor 'rope_freqs.weight' beside " + a + "rope.scaling.type " +
                detail::quote(scaling) + " is not served");
    if (t->type_name != "F32" || t->shape.size() != 1 || !t->data)
      file.fail("tensor 'rope_freqs.weight' is " + t->type_name + " of " +
                std::to_string(t->shape.size()) +
                " dimensions; llama.cpp writes one row of F32 factors");
    std::vector<float> factors(static_cast<std::size_t>(t->shape[0]));
    std::memcpy(factors.data(), t->data, factors.size() * sizeof(float));
    c.scaling.type = rope_scaling::kind::per_frequency;
    c.scaling.frequency_factors.assign(factors.begin(), factors.end());
  }
  // llama.cpp's converter interleaves Llama's q/k rows for its RoPE; Qwen's it keeps.
  c.rope =
      c.arch == architecture::llama ? rope_pairs::interleaved : rope_pairs::rotate_half;
  c.qkv_bias = c.arch == architecture::qwen2;
  c.qk_norm = c.arch == architecture::qwen3;
  const gguf_tensor* embed = tensor_named(file, "token_embd.weight");
  if (!embed)
    file.fail("no tensor 'token_embd.weight'");
  c.vocab_size = file.integer(a + "vocab_size")
                     .value_or(embed->shape.empty() ? 0 : embed->shape.front());
  c.tied_embeddings = tensor_named(file, "output.weight") == nullptr;
  c.bos_token_id = file.integer("tokenizer.ggml.bos_token_id").value_or(-1);
  c.eos_token_id = file.integer("tokenizer.ggml.eos_token_id").value_or(-1);
  validate_model_config(c, file.source());
  return c;
}

model_config load_gguf_config(const std::filesystem::path& path) {
  return gguf_model_config(gguf_file(path, gguf_arrays::skip));
}

checkpoint load_gguf_checkpoint(const std::filesystem::path& path) {
  const gguf_file file(path, gguf_arrays::skip);
  checkpoint out;
  out.source = file.source();
  out.config = gguf_model_config(file);
  for (const auto& t : file.tensors()) {
    if (t.name == rope_freqs_tensor)
      continue;
    const auto dtype = dtype_of(t);
    if (!dtype)
      file.fail("tensor " + detail::quote(t.name) + " is " + t.type_name +
                "; Canopy reads F32, F16, BF16, Q8_0 and Q4_0 (llama-quantize --pure "
                "writes one type throughout)");
    if (!out.tensors.emplace(canonical_name(t.name), tensor_view{*dtype, t.shape, t.data})
             .second)
      file.fail("tensor " + detail::quote(t.name) + " appears twice");
  }
  check_tensor_schema(out.config, out.tensors, out.source);
  out.storage = file.storage();
  return out;
}

} // namespace canopy::backends
