#include <canopy/actors/model_tokenizer.hpp>

#include <canopy/error.hpp>

namespace canopy::actors {

std::optional<model_tokenizer> load_model_tokenizer(const engine_config& config,
                                                    std::int64_t vocab_size) {
  if (config.backend != "torch")
    return std::nullopt;
  std::filesystem::path path = config.tokenizer;
  if (path.empty() && !config.model.empty())
    path = backends::find_tokenizer(config.model);
  if (path.empty())
    return std::nullopt;
  model_tokenizer out;
  try {
    out.tokenizer = backends::load_tokenizer(path);
  } catch (const std::exception& e) {
    throw error(errc::invalid_config, std::string("tokenizer: ") + e.what());
  }
  out.byte_vocab = out.tokenizer->byte_vocab();
  const auto ids = static_cast<std::int64_t>(out.byte_vocab.size());
  if (ids > vocab_size)
    throw error(errc::invalid_config,
                "tokenizer " + path.string() + " has " + std::to_string(ids) +
                  " ids but the model's head has " + std::to_string(vocab_size) + " rows");
  out.byte_vocab.resize(static_cast<std::size_t>(vocab_size));
  out.special_texts.resize(out.byte_vocab.size());
  for (std::int64_t id = 0; id < ids; ++id)
    if (!out.byte_vocab[static_cast<std::size_t>(id)])
      out.special_texts[static_cast<std::size_t>(id)] =
        out.tokenizer->token_text(static_cast<cache::token_id>(id));
  return out;
}

backends::special_tokens load_special_tokens(const engine_config& config,
                                             std::int64_t vocab_size,
                                             const model_tokenizer* tokenizer) {
  if (config.backend != "torch")
    return {};
  try {
    return backends::read_special_tokens(config.model, vocab_size,
                                         tokenizer ? tokenizer->tokenizer.get() : nullptr);
  } catch (const std::exception& e) {
    throw error(errc::invalid_config, std::string("special tokens: ") + e.what());
  }
}

} // namespace canopy::actors
