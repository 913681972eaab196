#include <canopy/backends/checkpoints/hf_config.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>

#include "checkpoints/message_text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
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

  bool has(const std::string& key) const { return root_.contains(key); }
  const std::string& file() const { return file_; }

  double number(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr)
      fail(key, "is missing");
    return number(key, 0.0);
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
  std::string file_;
};

/// The architectures config.json may name, as "architectures" and as "model_type".
struct known_architecture {
  const char* class_name;
  architecture arch;
};
constexpr known_architecture known_architectures[] = {
    {"LlamaForCausalLM", architecture::llama},
    {"MistralForCausalLM", architecture::mistral},
    {"Qwen2ForCausalLM", architecture::qwen2},
    {"Qwen3ForCausalLM", architecture::qwen3},
    {"GPT2LMHeadModel", architecture::gpt2},
};

std::string known_names(bool classes) {
  std::string out;
  for (const auto& k : known_architectures)
    out += (out.empty() ? "" : ", ") + (classes ? k.class_name : to_string(k.arch));
  return out;
}

architecture detect_architecture(const config_reader& in) {
  const std::string model_type = in.string("model_type", "");
  std::string named; // the first entry of "architectures", if any
  if (const json* list = in.find("architectures")) {
    if (!list->is_array() || list->empty() || !list->front().is_string())
      in.fail("architectures", "is not a list of names");
    named = list->front().get<std::string>();
  }
  if (named.empty()) {
    for (const auto& k : known_architectures)
      if (model_type == to_string(k.arch))
        return k.arch;
    in.fail("model_type", model_type.empty()
                              ? "is missing (and there is no \"architectures\")"
                              : "'" + detail::clip(model_type) + "' is not supported (" +
                                    known_names(false) + ")");
  }
  const auto* found =
      std::find_if(std::begin(known_architectures), std::end(known_architectures),
                   [&](const known_architecture& k) { return named == k.class_name; });
  if (found == std::end(known_architectures))
    in.fail("architectures", "names '" + detail::clip(named) +
                                 "', which is not supported (" + known_names(true) + ")");
  if (!model_type.empty() && model_type != to_string(found->arch))
    in.fail("model_type", "'" + detail::clip(model_type) +
                              "' contradicts architectures '" + named + "'");
  return found->arch;
}

/// HF's rope_scaling object ("rope_type", or "type" in older files). Schemes other
/// than linear and llama3 are refused by name (model_config.hpp says why dynamic is).
rope_scaling read_rope_scaling(const config_reader& in) {
  rope_scaling out;
  const json* value = in.find("rope_scaling");
  if (value == nullptr)
    return out;
  if (!value->is_object())
    in.fail("rope_scaling", "is not an object (" + detail::clip(value->dump()) + ")");
  const config_reader scaling(*value, in.file() + ": \"rope_scaling\"");
  std::string type = scaling.string("rope_type", "");
  if (type.empty())
    type = scaling.string("type", "");
  if (type == "default")
    return out;
  if (type == "linear") {
    out.type = rope_scaling::kind::linear;
    out.factor = scaling.number("factor");
  } else if (type == "llama3") {
    out.type = rope_scaling::kind::llama3;
    out.factor = scaling.number("factor");
    out.low_freq_factor = scaling.number("low_freq_factor");
    out.high_freq_factor = scaling.number("high_freq_factor");
    out.original_context = scaling.integer("original_max_position_embeddings");
  } else if (type == "dynamic") {
    in.fail("rope_scaling", "type 'dynamic' is not supported: its angles change with the "
                            "sequence's length, so a cached prefix's KV would not match "
                            "(supported: linear, llama3)");
  } else {
    in.fail("rope_scaling", "type '" + detail::clip(type) +
                                "' is not supported (supported: linear, llama3)");
  }
  return out;
}

/// The sliding window a Mistral config gives: HF's MistralConfig defaults to 4096 when
/// the key is absent, and null means none.
std::int64_t mistral_window(const config_reader& in) {
  if (!in.has("sliding_window"))
    return 4096;
  return in.integer("sliding_window", 0);
}

/// Keys that change the arithmetic in architectures Canopy does not implement (or in
/// variants of the ones it does); a config that sets one to anything but its neutral
/// value is refused by name rather than silently computed wrong.
void refuse_unimplemented_math(const config_reader& in, architecture arch) {
  const auto refuse_unless = [&](const char* key, const json& neutral) {
    if (const json* value = in.find(key); value != nullptr && *value != neutral)
      in.fail(key, "is " + detail::clip(value->dump()) +
                       "; it changes the model's "
                       "arithmetic in a way Canopy does not implement (only " +
                       neutral.dump() + ")");
  };
  const auto refuse_if_set = [&](const char* key) {
    if (const json* value = in.find(key))
      in.fail(key, "is " + detail::clip(value->dump()) +
                       "; it changes the model's "
                       "arithmetic in a way Canopy does not implement (only null)");
  };
  if (const std::string act = in.string("hidden_act", "silu"); act != "silu")
    in.fail("hidden_act", "'" + detail::clip(act) + "' is not supported (only silu)");
  // Llama's and Qwen3's attention_bias puts biases on o_proj too; Qwen2's q/k/v
  // biases are part of the architecture, not a setting.
  if (arch != architecture::qwen2)
    refuse_unless("attention_bias", false);
  refuse_unless("mlp_bias", false);
  refuse_unless("use_sliding_window", false); // Qwen: windows on some layers only
  refuse_unless("partial_rotary_factor", 1.0);
  refuse_if_set("attn_logit_softcapping");
  refuse_if_set("final_logit_softcapping");
  refuse_if_set("query_pre_attn_scalar");
  refuse_if_set("logit_scale");
  refuse_if_set("embedding_multiplier");
  refuse_if_set("residual_multiplier");
  refuse_if_set("attention_multiplier");
  refuse_if_set("no_rope_layers");
  if (const json* types = in.find("layer_types")) {
    const bool windowed = arch == architecture::mistral;
    const std::string every = windowed ? "sliding_attention" : "full_attention";
    if (!types->is_array() || std::any_of(types->begin(), types->end(),
                                          [&](const json& t) { return t != every; }))
      in.fail("layer_types", "is " + detail::clip(types->dump()) + "; only '" + every +
                                 "' on every layer is supported");
  }
}

model_config read_llama_style(const config_reader& in, architecture arch) {
  model_config c;
  c.arch = arch;
  c.rope = rope_pairs::rotate_half;
  c.hidden_size = in.integer("hidden_size");
  c.intermediate_size = in.integer("intermediate_size");
  c.num_layers = in.integer("num_hidden_layers");
  c.num_heads = in.integer("num_attention_heads");
  c.num_kv_heads = in.integer("num_key_value_heads", c.num_heads);
  // HF's Qwen3Config defaults head_dim to 128; the others derive it.
  if (arch == architecture::qwen3) {
    c.head_dim = in.integer("head_dim", 128);
  } else {
    if (in.find("head_dim") == nullptr && c.num_heads > 0 &&
        c.hidden_size % c.num_heads != 0)
      in.fail("hidden_size", std::to_string(c.hidden_size) +
                                 " is not divisible by num_attention_heads " +
                                 std::to_string(c.num_heads) +
                                 " and there is no head_dim");
    c.head_dim =
        in.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  }
  c.vocab_size = in.integer("vocab_size");
  c.context_length = in.integer("max_position_embeddings");
  c.norm_eps = in.number("rms_norm_eps", 1e-6);
  c.rope_theta = in.number("rope_theta", 10000.0);
  c.tied_embeddings = in.boolean("tie_word_embeddings", false);
  c.bos_token_id = in.token_id("bos_token_id");
  c.eos_token_id = in.token_id("eos_token_id");
  c.scaling = read_rope_scaling(in);
  c.qkv_bias = arch == architecture::qwen2;
  c.qk_norm = arch == architecture::qwen3;
  if (arch == architecture::mistral)
    c.sliding_window = mistral_window(in);
  refuse_unimplemented_math(in, arch);
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
  case weight_dtype::q8_0: // never written (safetensors holds no blocks)
  case weight_dtype::q4_0:
    break;
  }
  return "float32";
}

/// null for "none known", so HF reads it as unset.
json token_json(std::int64_t id) {
  return id < 0 ? json(nullptr) : json(id);
}

const char* class_name(architecture arch) {
  for (const auto& k : known_architectures)
    if (k.arch == arch)
      return k.class_name;
  return "";
}

json rope_scaling_json(const rope_scaling& scaling) {
  switch (scaling.type) {
  case rope_scaling::kind::none:
    break;
  case rope_scaling::kind::linear:
    return {{"rope_type", "linear"}, {"factor", scaling.factor}};
  case rope_scaling::kind::llama3:
    return {{"rope_type", "llama3"},
            {"factor", scaling.factor},
            {"low_freq_factor", scaling.low_freq_factor},
            {"high_freq_factor", scaling.high_freq_factor},
            {"original_max_position_embeddings", scaling.original_context}};
  case rope_scaling::kind::per_frequency:
    throw checkpoint_error("per-frequency RoPE factors (a GGUF file's rope_freqs) have "
                           "no config.json form");
  }
  return nullptr;
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
  const architecture arch = detect_architecture(in);
  model_config config = llama_style(arch) ? read_llama_style(in, arch) : read_gpt2(in);
  validate_model_config(config, file_name);
  return config;
}

std::string hf_config_json(const model_config& c, weight_dtype dtype) {
  nlohmann::ordered_json out;
  if (llama_style(c.arch)) {
    out["architectures"] = {class_name(c.arch)};
    out["model_type"] = to_string(c.arch);
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
    out["rope_scaling"] = rope_scaling_json(c.scaling);
    out["hidden_act"] = "silu";
    if (c.arch == architecture::mistral)
      out["sliding_window"] =
          c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
    if (c.arch == architecture::qwen2 || c.arch == architecture::qwen3)
      out["use_sliding_window"] = false;
    if (c.arch == architecture::llama || c.arch == architecture::qwen3)
      out["attention_bias"] = false;
    if (c.arch == architecture::llama)
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
