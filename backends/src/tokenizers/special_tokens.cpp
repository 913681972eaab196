// BOS and EOS ids from a model's files (see special_tokens.hpp).
#include <canopy/backends/tokenizers/special_tokens.hpp>

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include "tokenizers/json_object_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace canopy::backends {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

class collector {
public:
  explicit collector(std::int64_t vocab_size) : vocab_size_(vocab_size) {}

  /// An id, a list of ids, or null at `key` of `doc` (read from `file`).
  std::vector<cache::token_id> ids(const json& doc, const char* key,
                                   const fs::path& file) const {
    std::vector<cache::token_id> out;
    if (!doc.is_object() || !doc.contains(key) || doc.at(key).is_null())
      return out;
    const auto& value = doc.at(key);
    const auto add = [&](const json& id) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() >= vocab_size_)
        throw checkpoint_error(file.string() + ": \"" + key + "\" " + id.dump() +
                               " is not a token id of the vocabulary (size " +
                               std::to_string(vocab_size_) + ")");
      out.push_back(id.get<cache::token_id>());
    };
    if (value.is_array())
      for (const auto& id : value)
        add(id);
    else
      add(value);
    return out;
  }

  void add_eos(const std::vector<cache::token_id>& ids) {
    for (const auto id : ids)
      if (std::find(result.eos.begin(), result.eos.end(), id) == result.eos.end())
        result.eos.push_back(id);
  }
  void add_bos(const std::vector<cache::token_id>& ids) {
    if (!result.bos && !ids.empty())
      result.bos = ids.front();
  }

  special_tokens result;

private:
  std::int64_t vocab_size_;
};

/// tokenizer_config.json's bos_token / eos_token: "text" or {"content": "text", ...}.
std::vector<cache::token_id> named_token(const json& doc, const char* key,
                                         const tokenizer_i* tokenizer,
                                         std::int64_t vocab) {
  if (tokenizer == nullptr || !doc.is_object() || !doc.contains(key))
    return {};
  const auto& value = doc.at(key);
  std::string text;
  if (value.is_string())
    text = value.get<std::string>();
  else if (value.is_object() && value.contains("content") &&
           value.at("content").is_string())
    text = value.at("content").get<std::string>();
  const auto id = text.empty() ? std::nullopt : tokenizer->token_id_of(text);
  if (!id || *id >= vocab)
    return {};
  return {*id};
}

} // namespace

special_tokens read_special_tokens(const fs::path& model, std::int64_t vocab_size,
                                   const tokenizer_i* tokenizer) {
  collector found(vocab_size);
  if (model.empty())
    return found.result;
  std::error_code ec;
  if (!fs::is_directory(model, ec)) {
    const auto config = load_model_config(model); // a llama2.c .bin: its format's ids
    found.add_bos(config.bos_token_id >= 0
                      ? std::vector<cache::token_id>{static_cast<cache::token_id>(
                            config.bos_token_id)}
                      : std::vector<cache::token_id>{});
    if (config.eos_token_id >= 0)
      found.add_eos({static_cast<cache::token_id>(config.eos_token_id)});
    return found.result;
  }
  const auto generation_file = model / "generation_config.json";
  const auto config_file = model / "config.json";
  const auto tokenizer_file = model / "tokenizer_config.json";
  const auto generation = detail::read_json_object(generation_file);
  const auto config = detail::read_json_object(config_file);
  const auto tokenizer_config = detail::read_json_object(tokenizer_file);
  found.add_eos(found.ids(generation, "eos_token_id", generation_file));
  found.add_eos(found.ids(config, "eos_token_id", config_file));
  found.add_eos(named_token(tokenizer_config, "eos_token", tokenizer, vocab_size));
  found.add_bos(found.ids(config, "bos_token_id", config_file));
  found.add_bos(found.ids(generation, "bos_token_id", generation_file));
  found.add_bos(named_token(tokenizer_config, "bos_token", tokenizer, vocab_size));
  return found.result;
}

} // namespace canopy::backends
