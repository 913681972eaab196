#include <canopy/backends/hf_config.hpp>

#include <canopy/backends/checkpoint_schema.hpp>

#include "message_text.hpp"

#include <nlohmann/json.hpp>

#include <limits>

namespace canopy::backends {

namespace {

using json = nlohmann::json;

/// Reads typed keys of one config object; every error names the file and the key.
class config_reader {
public:
  config_reader(const json& root, const std::string& file) : root_(root), file_(file) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw checkpoint_error(file_ + ": \"" + key + "\" " + what);
  }

  /// The value at `key`, or nullptr when absent or null (HF writes null for "unset").
  const json* find(const std::string& key) const {
    auto it = root_.find(key);
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }

  std::int64_t integer(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr)
      fail(key, "is missing");
    return as_integer(key, *value);
  }

  std::int64_t integer(const std::string& key, std::int64_t fallback) const {
    const json* value = find(key);
    return value == nullptr ? fallback : as_integer(key, *value);
  }

  double number(const std::string& key, double fallback) const {
    const json* value = find(key);
    if (value == nullptr)
      return fallback;
    if (!value->is_number())
      fail(key, "is not a number (" + detail::clip(value->dump()) + ")");
    return value->get<double>();
  }

  bool boolean(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr)
      return fallback;
    if (!value->is_boolean())
      fail(key, "is not true or false (" + detail::clip(value->dump()) + ")");
    return value->get<bool>();
  }

  std::string string(const std::string& key, const std::string& fallback) const {
    const json* value = find(key);
    if (value == nullptr)
      return fallback;
    if (!value->is_string())
      fail(key, "is not a string (" + detail::clip(value->dump()) + ")");
    return value->get<std::string>();
  }

  /// bos/eos: an id, null (none: -1), or a list of ids (newer HF configs give several
  /// stop ids; the first is the one a single-id API can carry).
  std::int64_t token_id(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr)
      return -1;
    if (value->is_array())
      return value->empty() ? -1 : as_integer(key, value->front());
    return as_integer(key, *value);
  }

private:
  std::int64_t as_integer(const std::string& key, const json& value) const {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(key, "is too large (" + value.dump() + ")");
    if (!value.is_number_integer())
      fail(key, "is not an integer (" + detail::clip(value.dump()) + ")");
    return value.get<std::int64_t>();
  }

  const json& root_;
  const std::string& file_;
};

architecture detect_architecture(const config_reader& in) {
  const std::string model_type = in.string("model_type", "");
  std::string named; // the first entry of "architectures", if any
  if (const json* list = in.find("architectures")) {
    if (!list->is_array() || list->empty() || !list->front().is_string())
      in.fail("architectures", "is not a list of names");
    named = list->front().get<std::string>();
  }
  if (named.empty()) {
    if (model_type == "llama")
      return architecture::llama;
    if (model_type == "gpt2")
      return architecture::gpt2;
    in.fail("model_type",
            model_type.empty()
                ? "is missing (and there is no \"architectures\")"
                : "'" + detail::clip(model_type) + "' is not supported (llama, gpt2)");
  }
  architecture arch;
  if (named == "LlamaForCausalLM")
    arch = architecture::llama;
  else if (named == "GPT2LMHeadModel")
    arch = architecture::gpt2;
  else
    in.fail("architectures", "names '" + detail::clip(named) +
                                 "', which is not supported (LlamaForCausalLM, "
                                 "GPT2LMHeadModel)");
  if (!model_type.empty() && model_type != to_string(arch))
    in.fail("model_type", "'" + detail::clip(model_type) +
                              "' contradicts architectures '" + named + "'");
  return arch;
}

model_config read_llama(const config_reader& in) {
  model_config c;
  c.arch = architecture::llama;
  c.rope = rope_pairs::rotate_half;
  c.hidden_size = in.integer("hidden_size");
  c.intermediate_size = in.integer("intermediate_size");
  c.num_layers = in.integer("num_hidden_layers");
  c.num_heads = in.integer("num_attention_heads");
  c.num_kv_heads = in.integer("num_key_value_heads", c.num_heads);
  if (in.find("head_dim") == nullptr && c.num_heads > 0 &&
      c.hidden_size % c.num_heads != 0)
    in.fail("hidden_size", std::to_string(c.hidden_size) +
                               " is not divisible by num_attention_heads " +
                               std::to_string(c.num_heads) + " and there is no head_dim");
  c.head_dim = in.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.vocab_size = in.integer("vocab_size");
  c.context_length = in.integer("max_position_embeddings");
  c.norm_eps = in.number("rms_norm_eps", 1e-6);
  c.rope_theta = in.number("rope_theta", 10000.0);
  c.tied_embeddings = in.boolean("tie_word_embeddings", false);
  c.bos_token_id = in.token_id("bos_token_id");
  c.eos_token_id = in.token_id("eos_token_id");
  if (const json* scaling = in.find("rope_scaling"))
    in.fail("rope_scaling", "is " + detail::clip(scaling->dump()) +
                                "; RoPE scaling is not supported (only null)");
  if (const std::string act = in.string("hidden_act", "silu"); act != "silu")
    in.fail("hidden_act", "'" + detail::clip(act) + "' is not supported (only silu)");
  if (in.boolean("attention_bias", false))
    in.fail("attention_bias", "is true; attention biases are not supported");
  if (in.boolean("mlp_bias", false))
    in.fail("mlp_bias", "is true; MLP biases are not supported");
  return c;
}

model_config read_gpt2(const config_reader& in) {
  model_config c;
  c.arch = architecture::gpt2;
  c.hidden_size = in.integer("n_embd");
  c.num_layers = in.integer("n_layer");
  c.num_heads = in.integer("n_head");
  c.num_kv_heads = c.num_heads;
  if (c.num_heads > 0 && c.hidden_size % c.num_heads != 0)
    in.fail("n_embd", std::to_string(c.hidden_size) + " is not divisible by n_head " +
                          std::to_string(c.num_heads));
  c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  c.intermediate_size = in.integer("n_inner", 4 * c.hidden_size);
  c.vocab_size = in.integer("vocab_size");
  c.context_length = in.integer("n_positions");
  c.norm_eps = in.number("layer_norm_epsilon", 1e-5);
  c.tied_embeddings = in.boolean("tie_word_embeddings", true);
  c.bos_token_id = in.token_id("bos_token_id");
  c.eos_token_id = in.token_id("eos_token_id");
  if (const std::string act = in.string("activation_function", "gelu_new");
      act != "gelu_new")
    in.fail("activation_function",
            "'" + detail::clip(act) +
                "' is not supported (only gelu_new, the tanh GELU)");
  if (!in.boolean("scale_attn_weights", true))
    in.fail("scale_attn_weights", "is false; unscaled attention is not supported");
  if (in.boolean("scale_attn_by_inverse_layer_idx", false))
    in.fail("scale_attn_by_inverse_layer_idx", "is true; it is not supported");
  return c;
}

const char* torch_dtype_name(weight_dtype dtype) {
  switch (dtype) {
  case weight_dtype::f16:
    return "float16";
  case weight_dtype::bf16:
    return "bfloat16";
  case weight_dtype::f32:
    break;
  }
  return "float32";
}

/// null for "none known", so HF reads it as unset.
json token_json(std::int64_t id) {
  return id < 0 ? json(nullptr) : json(id);
}

} // namespace

model_config parse_hf_config(std::string_view json_text, const std::string& file_name) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    throw checkpoint_error(file_name + ": not valid JSON: " + e.what());
  }
  if (!root.is_object())
    throw checkpoint_error(file_name + ": not a JSON object");
  const config_reader in(root, file_name);
  model_config config =
      detect_architecture(in) == architecture::llama ? read_llama(in) : read_gpt2(in);
  validate_model_config(config, file_name);
  return config;
}

std::string hf_config_json(const model_config& c, weight_dtype dtype) {
  nlohmann::ordered_json out;
  if (c.arch == architecture::llama) {
    out["architectures"] = {"LlamaForCausalLM"};
    out["model_type"] = "llama";
    out["hidden_size"] = c.hidden_size;
    out["intermediate_size"] = c.intermediate_size;
    out["num_hidden_layers"] = c.num_layers;
    out["num_attention_heads"] = c.num_heads;
    out["num_key_value_heads"] = c.num_kv_heads;
    out["head_dim"] = c.head_dim;
    out["vocab_size"] = c.vocab_size;
    out["max_position_embeddings"] = c.context_length;
    out["rms_norm_eps"] = c.norm_eps;
    out["rope_theta"] = c.rope_theta;
    out["rope_scaling"] = nullptr;
    out["hidden_act"] = "silu";
    out["attention_bias"] = false;
    out["mlp_bias"] = false;
  } else {
    out["architectures"] = {"GPT2LMHeadModel"};
    out["model_type"] = "gpt2";
    out["activation_function"] = "gelu_new";
    out["n_layer"] = c.num_layers;
    out["n_head"] = c.num_heads;
    out["n_embd"] = c.hidden_size;
    out["n_inner"] = c.intermediate_size;
    out["n_positions"] = c.context_length;
    out["n_ctx"] = c.context_length;
    out["vocab_size"] = c.vocab_size;
    out["layer_norm_epsilon"] = c.norm_eps;
    out["scale_attn_weights"] = true;
    out["scale_attn_by_inverse_layer_idx"] = false;
    out["reorder_and_upcast_attn"] = false;
  }
  out["tie_word_embeddings"] = c.tied_embeddings;
  out["bos_token_id"] = token_json(c.bos_token_id);
  out["eos_token_id"] = token_json(c.eos_token_id);
  out["torch_dtype"] = torch_dtype_name(dtype);
  return out.dump(1) + "\n";
}

} // namespace canopy::backends
