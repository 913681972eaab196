#include <canopy/backends/checkpoints/hf_checkpoint.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/hf_config.hpp>
#include <canopy/backends/checkpoints/mapped_file.hpp>
#include <canopy/backends/checkpoints/safetensors.hpp>

#include "checkpoints/message_text.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <set>
#include <vector>

namespace canopy::backends {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// Existence without throwing: an unreadable path shows up as an error naming it when
/// it is opened.
bool present(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

/// Tensors as read, before normalization: name -> view, and the file each came from.
struct raw_tensors {
  std::map<std::string, tensor_view> views;
  std::map<std::string, std::string> files;
};

void add_file(const mapped_file& file, raw_tensors& out) {
  const std::string name = file.path().string();
  const safetensors_header header = parse_safetensors_header(file.bytes(), name);
  for (auto& [tensor, view] : safetensors_views(header, file.bytes())) {
    out.files[tensor] = name;
    out.views.emplace(tensor, std::move(view));
  }
}

/// weight_map of an index file: tensor -> shard file name.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  const std::string file = index_path.string();
  const mapped_file bytes(index_path);
  json index;
  try {
    index = json::parse(bytes.bytes().begin(), bytes.bytes().end());
  } catch (const json::exception& e) {
    throw checkpoint_error(file + ": not valid JSON: " + e.what());
  }
  auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object())
    throw checkpoint_error(file + ": no \"weight_map\" object");
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string())
      throw checkpoint_error(file + ": tensor " + detail::quote(tensor) +
                             ": shard is not a file name");
    const std::string& name = shard.get_ref<const std::string&>();
    // Shards live beside the index: a path elsewhere is a malformed (or hostile) index.
    if (name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string::npos)
      throw checkpoint_error(file + ": tensor " + detail::quote(tensor) + ": shard " +
                             detail::quote(name) + " is not a file name in " +
                             index_path.parent_path().string());
    out.emplace(tensor, name);
  }
  return out;
}

void add_shards(const fs::path& dir, const fs::path& index_path,
                std::vector<mapped_file>& files, raw_tensors& out) {
  const std::string index_file = index_path.string();
  const auto weight_map = read_weight_map(index_path);
  std::map<std::string, std::set<std::string>> by_shard; // shard -> its tensors
  for (const auto& [tensor, shard] : weight_map)
    by_shard[shard].insert(tensor);
  for (const auto& [shard, listed] : by_shard) {
    const fs::path path = dir / shard;
    if (!present(path))
      throw checkpoint_error(index_file + ": shard " + detail::quote(shard) +
                             " (holding tensor " + detail::quote(*listed.begin()) +
                             ") is missing: " + path.string());
    files.emplace_back(path);
    raw_tensors shard_tensors;
    add_file(files.back(), shard_tensors);
    for (const std::string& tensor : listed)
      if (shard_tensors.views.count(tensor) == 0)
        throw checkpoint_error(index_file + ": tensor " + detail::quote(tensor) +
                               " is listed in shard " + detail::quote(shard) + " but " +
                               path.string() + " does not hold it");
    for (auto& [tensor, view] : shard_tensors.views) {
      if (listed.count(tensor) == 0) {
        auto elsewhere = weight_map.find(tensor);
        throw checkpoint_error(
            path.string() + ": tensor " + detail::quote(tensor) +
            " is not listed for this shard in " + index_file +
            (elsewhere == weight_map.end()
                 ? std::string(" (not listed at all)")
                 : " (listed for shard " + detail::quote(elsewhere->second) + ")"));
      }
      out.files[tensor] = path.string();
      out.views.emplace(tensor, std::move(view));
    }
  }
}

/// h.N.attn.bias / h.N.attn.masked_bias, with or without "transformer.": GPT-2's
/// causal-mask buffers, saved by older transformers versions, not parameters.
bool is_gpt2_mask_buffer(std::string_view name) {
  constexpr std::string_view prefix = "transformer.";
  if (name.substr(0, prefix.size()) == prefix)
    name.remove_prefix(prefix.size());
  if (name.substr(0, 2) != "h.")
    return false;
  name.remove_prefix(2);
  std::size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits])))
    ++digits;
  if (digits == 0)
    return false;
  name.remove_prefix(digits);
  return name == ".attn.bias" || name == ".attn.masked_bias";
}

/// model.layers.N.self_attn.rotary_emb.inv_freq: a RoPE frequency buffer some llama
/// conversions saved; derived from rope_theta, not a parameter.
bool is_llama_rope_buffer(const std::string& name) {
  constexpr std::string_view suffix = ".self_attn.rotary_emb.inv_freq";
  return name.rfind("model.layers.", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string canonical_gpt2_name(const std::string& name) {
  for (const char* top : {"h.", "wte.", "wpe.", "ln_f."})
    if (name.rfind(top, 0) == 0)
      return "transformer." + name;
  return name;
}

/// Renames and drops as described in the header; tensor_files follows the renames.
std::map<std::string, tensor_view> normalize(const model_config& config, raw_tensors raw,
                                             std::map<std::string, std::string>& files) {
  std::map<std::string, tensor_view> out;
  std::map<std::string, std::string> original; // canonical -> name in the file
  for (auto& [name, view] : raw.views) {
    const std::string& file = raw.files[name];
    std::string canonical = name;
    if (config.arch == architecture::gpt2) {
      if (is_gpt2_mask_buffer(name))
        continue;
      canonical = canonical_gpt2_name(name);
    } else if (is_llama_rope_buffer(name)) {
      continue;
    }
    if (canonical == "lm_head.weight" && config.tied_embeddings) {
      const std::vector<std::int64_t> embedding{config.vocab_size, config.hidden_size};
      if (view.shape != embedding)
        throw checkpoint_error(file + ": tensor 'lm_head.weight' has shape " +
                               detail::shape_text(view.shape) +
                               " but the config ties it to the embedding " +
                               detail::shape_text(embedding));
      continue;
    }
    if (auto [it, fresh] = original.emplace(canonical, name); !fresh)
      throw checkpoint_error(file + ": tensors " + detail::quote(it->second) + " and " +
                             detail::quote(name) + " are both " +
                             detail::quote(canonical));
    files[canonical] = file;
    out.emplace(canonical, std::move(view));
  }
  return out;
}

} // namespace

model_config load_hf_config(const fs::path& dir) {
  const fs::path config_path = dir / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec))
    throw checkpoint_error(dir.string() +
                           ": no config.json (not an HF checkpoint directory)");
  const mapped_file config_file(config_path);
  return parse_hf_config(config_file.bytes(), config_path.string());
}

checkpoint load_hf_checkpoint(const fs::path& dir) {
  checkpoint out;
  out.source = dir.string();
  out.config = load_hf_config(dir);

  auto files = std::make_shared<std::vector<mapped_file>>();
  raw_tensors raw;
  fs::path weights = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (present(weights)) {
    files->emplace_back(weights);
    add_file(files->back(), raw);
  } else if (present(index)) {
    weights = index;
    add_shards(dir, index, *files, raw);
  } else {
    std::string hint;
    if (present(dir / "pytorch_model.bin"))
      hint = " (pytorch_model.bin is not supported: convert it to safetensors)";
    throw checkpoint_error(
        dir.string() + ": no model.safetensors or model.safetensors.index.json" + hint);
  }

  std::map<std::string, std::string> tensor_files;
  out.tensors = normalize(out.config, std::move(raw), tensor_files);
  check_tensor_schema(out.config, out.tensors, weights.string(), tensor_files);
  out.storage = std::move(files);
  return out;
}

} // namespace canopy::backends
