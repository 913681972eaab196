#include <canopy/backends/checkpoints/lora_adapter.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/mapped_file.hpp>
#include <canopy/backends/checkpoints/safetensors.hpp>

#include "checkpoints/message_text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace canopy::backends {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Keys of adapter_config.json that never change the forward, whatever they hold: where
// the adapter came from, how it was trained or initialised, and the ones read below.
const std::set<std::string> neutral_keys{"base_model_name_or_path",
                                         "revision",
                                         "task_type",
                                         "inference_mode",
                                         "peft_type",
                                         "auto_mapping",
                                         "r",
                                         "lora_alpha",
                                         "lora_dropout",
                                         "use_rslora",
                                         "target_modules",
                                         "init_lora_weights",
                                         "loftq_config",
                                         "eva_config",
                                         "corda_config",
                                         "runtime_config",
                                         "megatron_core",
                                         "peft_version",
                                         "qalora_group_size"};

/// null, false, an empty string, list or object: what PEFT writes for a feature unused.
bool unset(const json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_string() && value.get<std::string>().empty()) ||
         ((value.is_array() || value.is_object()) && value.empty());
}

/// What an unsupported key does, for its message.
std::string effect_of(const std::string& key) {
  static const std::map<std::string, std::string> effects{
      {"use_dora", "DoRA's magnitude vectors"},
      {"bias", "trained biases"},
      {"lora_bias", "a trained bias on lora_B"},
      {"modules_to_save", "whole modules replaced"},
      {"fan_in_fan_out", "transposed (Conv1D) weights"},
      {"layers_to_transform", "a subset of the layers adapted"},
      {"layers_pattern", "a subset of the layers adapted"},
      {"rank_pattern", "a rank per module"},
      {"alpha_pattern", "an alpha per module"},
      {"exclude_modules", "modules left out of target_modules"},
      {"layer_replication", "layers replicated"},
      {"trainable_token_indices", "trained token embeddings"},
      {"use_qalora", "QA-LoRA's pooled inputs"},
      {"target_parameters", "parameters adapted directly"},
      {"megatron_config", "Megatron-parallel layers"}};
  const auto it = effects.find(key);
  return it != effects.end() ? it->second : "a setting this reader does not know";
}

struct adapter_settings {
  std::int64_t rank = 0;
  double alpha = 0;
  bool rslora = false;
  std::vector<std::string> modules;
};

adapter_settings read_settings(const json& root, const std::string& file) {
  auto fail = [&](const std::string& key, const std::string& what) {
    throw checkpoint_error(file + ": " + detail::quote(key) + " " + what);
  };
  if (!root.is_object())
    throw checkpoint_error(file + ": not a JSON object");
  for (const auto& [key, value] : root.items()) {
    if (neutral_keys.count(key) != 0 || unset(value))
      continue;
    if (key == "bias" && value == "none")
      continue;
    fail(key, "is " + detail::clip(value.dump(), 80) + ": " + effect_of(key) +
                  ", which Canopy's adapters do not support");
  }
  const auto type = root.value("peft_type", std::string("LORA"));
  if (type != "LORA")
    fail("peft_type", "is " + detail::quote(type) + "; only LORA adapters are supported");
  adapter_settings s;
  const auto r = root.find("r");
  if (r == root.end() || !r->is_number_integer() || r->get<std::int64_t>() <= 0)
    fail("r", "must be a positive integer (the adapter's rank)");
  s.rank = r->get<std::int64_t>();
  const auto alpha = root.find("lora_alpha");
  if (alpha == root.end() || !alpha->is_number() || !std::isfinite(alpha->get<double>()))
    fail("lora_alpha", "must be a finite number");
  s.alpha = alpha->get<double>();
  const auto rslora = root.find("use_rslora");
  if (rslora != root.end() && !rslora->is_null() && !rslora->is_boolean())
    fail("use_rslora", "must be true or false");
  s.rslora = rslora != root.end() && rslora->is_boolean() && rslora->get<bool>();
  const auto targets = root.find("target_modules");
  if (targets == root.end() || targets->is_null())
    fail("target_modules", "is missing");
  std::set<std::string> wanted;
  if (targets->is_string()) {
    if (*targets != "all-linear")
      fail("target_modules", "is the pattern " + detail::clip(targets->dump(), 80) +
                                 "; list the modules instead (or \"all-linear\")");
    wanted.insert(lora_module_names.begin(), lora_module_names.end());
  } else if (targets->is_array()) {
    for (const auto& t : *targets) {
      if (!t.is_string())
        fail("target_modules",
             "holds " + detail::clip(t.dump(), 80) + ", not a module name");
      const auto name = t.get<std::string>();
      if (std::find(lora_module_names.begin(), lora_module_names.end(), name) ==
          lora_module_names.end())
        fail("target_modules", "names " + detail::quote(name) +
                                   "; adapters may target q_proj, k_proj, v_proj, "
                                   "o_proj, gate_proj, up_proj and down_proj");
      wanted.insert(name);
    }
    if (wanted.empty())
      fail("target_modules", "is empty");
  } else {
    fail("target_modules", "must be a list of module names");
  }
  for (const char* name : lora_module_names)
    if (wanted.count(name) != 0)
      s.modules.emplace_back(name);
  return s;
}

} // namespace

std::string lora_adapted_weight(std::int64_t layer, const std::string& module) {
  const bool attention = module == "q_proj" || module == "k_proj" || module == "v_proj" ||
                         module == "o_proj";
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") +
         module + ".weight";
}

lora_adapter_files read_lora_adapter_files(const fs::path& dir, std::uint64_t max_bytes) {
  const fs::path config_path = dir / "adapter_config.json";
  const fs::path weights_path = dir / "adapter_model.safetensors";
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec))
    throw checkpoint_error(dir.string() +
                           ": no adapter_config.json (not a PEFT adapter directory)");
  if (!fs::is_regular_file(weights_path, ec))
    throw checkpoint_error(dir.string() + ": no adapter_model.safetensors" +
                           (fs::is_regular_file(dir / "adapter_model.bin", ec)
                                ? " (adapter_model.bin is a pickle, which Canopy does "
                                  "not read; save with safe_serialization=True)"
                                : ""));
  const mapped_file config(config_path);
  const mapped_file weights(weights_path);
  const std::uint64_t bytes = config.size() + weights.size();
  if (bytes > max_bytes)
    throw checkpoint_error(dir.string() + ": the adapter's files hold " +
                           std::to_string(bytes) + " bytes, more than the " +
                           std::to_string(max_bytes) + " its budget allows");
  return {dir.string(), std::string(config.bytes()), std::string(weights.bytes())};
}

lora_adapter load_lora_adapter(const fs::path& dir, const model_config& base,
                               const std::string& base_source) {
  auto files = std::make_shared<const lora_adapter_files>(read_lora_adapter_files(dir));
  auto out = parse_lora_adapter(*files, base, base_source);
  out.storage = std::move(files);
  return out;
}

lora_adapter parse_lora_adapter(const lora_adapter_files& files, const model_config& base,
                                const std::string& base_source) {
  const fs::path dir = files.source;
  const std::string config_file = (dir / "adapter_config.json").string();
  json root;
  try {
    root = json::parse(files.config_json);
  } catch (const json::exception& e) {
    throw checkpoint_error(config_file + ": not valid JSON: " + e.what());
  }
  const adapter_settings settings = read_settings(root, config_file);

  if (!llama_style(base.arch))
    throw checkpoint_error(dir.string() + ": adapters apply to Llama-family models; " +
                           base_source + " is " + to_string(base.arch));
  const bool moves_qk =
      std::any_of(settings.modules.begin(), settings.modules.end(),
                  [](const std::string& m) { return m == "q_proj" || m == "k_proj"; });
  if (moves_qk && base.rope == rope_pairs::interleaved)
    throw checkpoint_error(
        dir.string() + ": targets q_proj or k_proj, whose rows " + base_source +
        " keeps in llama2.c's interleaved RoPE order; load the model as an HF "
        "directory (canopy convert) to adapt them");

  lora_adapter out;
  out.source = dir.string();
  out.rank = settings.rank;
  out.alpha = settings.alpha;
  out.rslora = settings.rslora;
  out.scale =
      settings.alpha / (settings.rslora ? std::sqrt(static_cast<double>(settings.rank))
                                        : static_cast<double>(settings.rank));
  out.modules = settings.modules;

  const std::string weights_file = (dir / "adapter_model.safetensors").string();
  const auto header = parse_safetensors_header(files.weights, weights_file);
  auto views = safetensors_views(header, files.weights);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& spec : expected_tensors(base))
    shapes[spec.name] = spec.shape;
  // PEFT saves each factor as base_model.model.<module path>.lora_{A,B}.weight.
  const std::string prefix = "base_model.model.";
  auto take = [&](const std::string& module_path, const char* factor,
                  const std::vector<std::int64_t>& shape) {
    const std::string name = prefix + module_path + "." + factor + ".weight";
    const auto it = views.find(name);
    if (it == views.end())
      throw checkpoint_error(weights_file + ": no tensor " + name);
    if (it->second.shape != shape)
      throw checkpoint_error(weights_file + ": " + name + " has shape " +
                             detail::shape_text(it->second.shape) + ", expected " +
                             detail::shape_text(shape) + " (rank " +
                             std::to_string(settings.rank) + " against " + base_source +
                             ")");
    tensor_view view = it->second;
    views.erase(it);
    return view;
  };
  for (std::int64_t layer = 0; layer < base.num_layers; ++layer)
    for (const auto& module : settings.modules) {
      const std::string weight = lora_adapted_weight(layer, module);
      const std::string path = weight.substr(0, weight.size() - std::strlen(".weight"));
      const auto& shape = shapes.at(weight); // [out, in]
      lora_factors f;
      f.a = take(path, "lora_A", {settings.rank, shape[1]});
      f.b = take(path, "lora_B", {shape[0], settings.rank});
      out.factors.emplace(weight, f);
    }
  if (!views.empty()) {
    std::string names;
    std::size_t listed = 0;
    for (const auto& [name, view] : views)
      if (listed++ < 5)
        names += (names.empty() ? "" : ", ") + detail::quote(name);
    if (views.size() > 5)
      names += " and " + std::to_string(views.size() - 5) + " more";
    throw checkpoint_error(weights_file + ": " + std::to_string(views.size()) +
                           " tensor(s) that target_modules and the model's layers do "
                           "not account for: " +
                           names);
  }
  return out;
}

} // namespace canopy::backends
