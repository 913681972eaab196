#include <canopy/actors/model_tokenizer.hpp>

#include <canopy/error.hpp>

namespace canopy::actors {

namespace {

/// The folder whose files come with a tokenizer at `path` (a file or a folder).
std::filesystem::path folder_of(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? path : path.parent_path();
}

} // namespace

std::filesystem::path configured_tokenizer_path(const engine_config& config) {
  if (config.backend != "torch" && config.backend != "mock")
    return {};
  if (!config.tokenizer.empty() || config.backend != "torch" || config.model.empty())
    return config.tokenizer;
  return backends::find_tokenizer(config.model);
}

std::shared_ptr<const backends::tokenizer_i>
load_configured_tokenizer(const std::filesystem::path& path) {
  if (path.empty())
    return nullptr;
  try {
    return backends::load_tokenizer(path);
  } catch (const std::exception& e) {
    throw error(errc::invalid_config, std::string("tokenizer: ") + e.what());
  }
}

model_tokenizer
fit_model_tokenizer(std::shared_ptr<const backends::tokenizer_i> tokenizer,
                    const std::filesystem::path& path, std::int64_t vocab_size) {
  model_tokenizer out;
  out.tokenizer = std::move(tokenizer);
  out.byte_vocab = out.tokenizer->byte_vocab();
  const auto ids = static_cast<std::int64_t>(out.byte_vocab.size());
  if (ids > vocab_size)
    throw error(errc::invalid_config, "the " + std::string(out.tokenizer->kind()) +
                                          " tokenizer has " + std::to_string(ids) +
                                          " ids but the model's head has " +
                                          std::to_string(vocab_size) + " rows");
  out.byte_vocab.resize(static_cast<std::size_t>(vocab_size));
  out.special_texts.resize(out.byte_vocab.size());
  for (std::int64_t id = 0; id < ids; ++id)
    if (!out.byte_vocab[static_cast<std::size_t>(id)])
      out.special_texts[static_cast<std::size_t>(id)] =
          out.tokenizer->token_text(static_cast<cache::token_id>(id));
  try {
    out.chat_templates = backends::read_chat_templates(folder_of(path));
  } catch (const std::exception& e) {
    throw error(errc::invalid_config, std::string("chat template: ") + e.what());
  }
  return out;
}

backends::special_tokens load_special_tokens(const engine_config& config,
                                             std::int64_t vocab_size,
                                             const model_tokenizer* tokenizer) {
  std::filesystem::path files = config.model;
  if (config.backend == "mock" && !config.tokenizer.empty())
    files = folder_of(config.tokenizer);
  else if (config.backend != "torch")
    return {};
  try {
    return backends::read_special_tokens(
        files, vocab_size, tokenizer ? tokenizer->tokenizer.get() : nullptr);
  } catch (const std::exception& e) {
    throw error(errc::invalid_config, std::string("special tokens: ") + e.what());
  }
}

} // namespace canopy::actors
