// load_tokenizer / find_tokenizer: which file of a model is its tokenizer, and which
// reader it needs (see tokenizer.hpp).
#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <canopy/backends/checkpoints/checkpoint_error.hpp>
#include <canopy/backends/checkpoints/gguf_file.hpp>
#include <canopy/backends/tokenizers/gguf_tokenizer.hpp>
#include <canopy/backends/tokenizers/gpt2_bpe_tokenizer.hpp>
#include <canopy/backends/tokenizers/hf_tokenizer.hpp>
#include <canopy/backends/tokenizers/llama2c_tokenizer.hpp>
#include <canopy/backends/tokenizers/sentencepiece_tokenizer.hpp>

#include "tokenizers/tokenizer_files.hpp"

namespace canopy::backends {

namespace fs = std::filesystem;

namespace {

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool is_dir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// The tokenizer inside a model directory, in order of preference; empty when none.
// An HF directory with vocab.json + merges.txt is named by the directory itself.
fs::path tokenizer_in_directory(const fs::path& dir) {
  if (is_file(dir / "tokenizer.json"))
    return dir / "tokenizer.json";
  if (is_file(dir / "vocab.json") && is_file(dir / "merges.txt"))
    return dir;
  for (const char* name : {"tokenizer.model", "tokenizer.bin", "tok512.bin"})
    if (is_file(dir / name))
      return dir / name;
  return {};
}

/// A GGUF file's tokenizer; nullptr when it holds none. The file's defects are
/// tokenizer_errors here.
std::unique_ptr<tokenizer_i> gguf_tokenizer_of(const fs::path& path) {
  try {
    return load_gguf_tokenizer(gguf_file(path));
  } catch (const checkpoint_error& e) {
    throw tokenizer_error(e.what());
  }
}

} // namespace

fs::path find_tokenizer(const fs::path& model_path) {
  if (is_dir(model_path))
    return tokenizer_in_directory(model_path);
  // A GGUF model carries its tokenizer (or none: llama.cpp's "no_vocab").
  if (is_file(model_path) && gguf_file::has_magic(model_path)) {
    try {
      const gguf_file file(model_path, gguf_arrays::skip);
      const auto model = file.string("tokenizer.ggml.model");
      return model && *model != "no_vocab" ? model_path : fs::path();
    } catch (const checkpoint_error&) {
      return model_path; // loading it names the defect
    }
  }
  if (!is_file(model_path) || model_path.extension() != ".bin")
    return {};
  // A llama2.c checkpoint: its tokenizer lies beside it (never the model file itself).
  const fs::path dir =
      model_path.has_parent_path() ? model_path.parent_path() : fs::path(".");
  for (const char* name : {"tokenizer.bin", "tok512.bin"}) {
    const fs::path candidate = dir / name;
    std::error_code ec;
    if (is_file(candidate) && !fs::equivalent(candidate, model_path, ec))
      return candidate;
  }
  return {};
}

std::unique_ptr<tokenizer_i> load_tokenizer(const fs::path& path) {
  if (is_dir(path)) {
    const fs::path found = tokenizer_in_directory(path);
    if (found.empty())
      tokenizer_detail::fail(path, "no tokenizer in this directory (looked for "
                                   "tokenizer.json, vocab.json + merges.txt, "
                                   "tokenizer.model, tokenizer.bin, tok512.bin)");
    if (found == path)
      return std::make_unique<gpt2_bpe_tokenizer>(path / "vocab.json",
                                                  path / "merges.txt");
    return load_tokenizer(found);
  }
  if (!is_file(path))
    tokenizer_detail::fail(path, "no such tokenizer file");
  if (gguf_file::has_magic(path)) {
    auto found = gguf_tokenizer_of(path);
    if (!found)
      tokenizer_detail::fail(path, "this GGUF file holds no tokenizer");
    return found;
  }
  const fs::path name = path.filename();
  if (name == "tokenizer.json")
    return std::make_unique<hf_tokenizer>(path);
  if (name == "vocab.json" || name == "merges.txt") {
    const fs::path dir = path.parent_path();
    if (!is_file(dir / "vocab.json") || !is_file(dir / "merges.txt"))
      tokenizer_detail::fail(
          path, "GPT-2 BPE needs both vocab.json and merges.txt in the same directory");
    return std::make_unique<gpt2_bpe_tokenizer>(dir / "vocab.json", dir / "merges.txt");
  }
  if (path.extension() == ".model")
    return load_sentencepiece_tokenizer(path);
  if (path.extension() == ".bin")
    return std::make_unique<llama2c_tokenizer>(path);
  tokenizer_detail::fail(
      path,
      "unrecognized tokenizer file (expected tokenizer.json, vocab.json + merges.txt, "
      "a SentencePiece .model or a llama2.c tokenizer .bin)");
}

} // namespace canopy::backends
