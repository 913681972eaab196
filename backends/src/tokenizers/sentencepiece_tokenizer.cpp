// SentencePiece .model tokenizer over the SentencePiece plugin (see
// sentencepiece_tokenizer.hpp and, for why a dlopen()ed plugin,
// sentencepiece_plugin_api.h).
#include <canopy/backends/tokenizers/sentencepiece_tokenizer.hpp>

#include "tokenizers/hf_pieces.hpp"
#include "tokenizers/sentencepiece_plugin_api.h"
#include "tokenizers/tokenizer_files.hpp"

#ifdef CANOPY_HAVE_SENTENCEPIECE
#include <dlfcn.h>

#include <cstdlib>
#endif

namespace canopy::backends {

#ifdef CANOPY_HAVE_SENTENCEPIECE

namespace {

using cache::token_id;
namespace fs = std::filesystem;

constexpr const char* plugin_file_name = "libcanopy_sentencepiece.so";

// The plugin's entry points, resolved once per process.
struct plugin {
  canopy_spm_load_fn load = nullptr;
  canopy_spm_free_fn free = nullptr;
  canopy_spm_piece_count_fn piece_count = nullptr;
  canopy_spm_piece_fn piece = nullptr;
  canopy_spm_bos_id_fn bos_id = nullptr;
  canopy_spm_encode_fn encode = nullptr;
  canopy_spm_decode_fn decode = nullptr;
  std::string error; // why it could not be loaded; empty when loaded
};

// Where the plugin may be: $CANOPY_SENTENCEPIECE_PLUGIN, beside the running executable,
// where this build put it, and where `cmake --install` puts it.
std::vector<fs::path> plugin_candidates() {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("CANOPY_SENTENCEPIECE_PLUGIN");
      env != nullptr && *env != '\0')
    out.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    out.push_back(exe.parent_path() / plugin_file_name);
  out.emplace_back(CANOPY_SENTENCEPIECE_PLUGIN);
  out.emplace_back(CANOPY_SENTENCEPIECE_PLUGIN_INSTALLED);
  return out;
}

plugin open_plugin() {
  plugin p;
  std::string tried;
  for (const fs::path& candidate : plugin_candidates()) {
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec)) {
      tried += " " + candidate.string() + " (absent);";
      continue;
    }
    // RTLD_LOCAL keeps libsentencepiece's protobuf out of the global scope (LibTorch's
    // libprotobuf must not bind to it); RTLD_DEEPBIND makes it use its own copy.
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      tried += " " + candidate.string() + " (" +
               (why != nullptr ? why : "dlopen failed") + ");";
      continue;
    }
    const auto symbol = [&](const char* name) { return ::dlsym(handle, name); };
    const auto version =
        reinterpret_cast<canopy_spm_abi_version_fn>(symbol("canopy_spm_abi_version"));
    if (version == nullptr || version() != CANOPY_SPM_ABI_VERSION) {
      tried +=
          " " + candidate.string() + " (not a matching Canopy SentencePiece plugin);";
      ::dlclose(handle);
      continue;
    }
    p.load = reinterpret_cast<canopy_spm_load_fn>(symbol("canopy_spm_load"));
    p.free = reinterpret_cast<canopy_spm_free_fn>(symbol("canopy_spm_free"));
    p.piece_count =
        reinterpret_cast<canopy_spm_piece_count_fn>(symbol("canopy_spm_piece_count"));
    p.piece = reinterpret_cast<canopy_spm_piece_fn>(symbol("canopy_spm_piece"));
    p.bos_id = reinterpret_cast<canopy_spm_bos_id_fn>(symbol("canopy_spm_bos_id"));
    p.encode = reinterpret_cast<canopy_spm_encode_fn>(symbol("canopy_spm_encode"));
    p.decode = reinterpret_cast<canopy_spm_decode_fn>(symbol("canopy_spm_decode"));
    if (p.load && p.free && p.piece_count && p.piece && p.bos_id && p.encode && p.decode)
      return p; // the handle stays open for the life of the process
    tried += " " + candidate.string() + " (missing entry points);";
    ::dlclose(handle);
    p = plugin{};
  }
  p.error = "SentencePiece .model support is unavailable: its plugin " +
            std::string(plugin_file_name) + " could not be loaded; tried:" + tried +
            " set CANOPY_SENTENCEPIECE_PLUGIN to its path";
  return p;
}

const plugin& the_plugin() {
  static const plugin p = open_plugin(); // thread-safe one-time initialization
  return p;
}

void append_to_string(void* ctx, const char* data, std::size_t size) {
  static_cast<std::string*>(ctx)->append(data, size);
}

void append_ids(void* ctx, const int* ids, std::size_t count) {
  static_cast<std::vector<token_id>*>(ctx)->insert(
      static_cast<std::vector<token_id>*>(ctx)->end(), ids, ids + count);
}

constexpr std::string_view space_symbol = "\xE2\x96\x81"; // U+2581, SentencePiece's space

std::string replace_space_symbol(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.substr(i, space_symbol.size()) == space_symbol) {
      out += ' ';
      i += space_symbol.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

class sentencepiece_tokenizer final : public tokenizer_i {
public:
  explicit sentencepiece_tokenizer(const fs::path& file) : plugin_(the_plugin()) {
    // Read the bytes here, so a missing file and a corrupt one get our own messages.
    const std::string bytes = tokenizer_detail::read_file(file);
    if (!plugin_.error.empty())
      tokenizer_detail::fail(file, plugin_.error);
    std::string error;
    model_ = plugin_.load(bytes.data(), bytes.size(), &append_to_string, &error);
    if (model_ == nullptr)
      tokenizer_detail::fail(file, "not a SentencePiece model: " + error);
    const int size = plugin_.piece_count(model_);
    if (size <= 0) {
      plugin_.free(model_);
      tokenizer_detail::fail(file, "SentencePiece model has no pieces");
    }
    bos_ = plugin_.bos_id(model_);
    byte_vocab_.resize(static_cast<std::size_t>(size));
    is_byte_.resize(static_cast<std::size_t>(size), false);
    for (int id = 0; id < size; ++id) {
      std::string piece;
      const int type = plugin_.piece(model_, id, &append_to_string, &piece);
      auto& slot = byte_vocab_[static_cast<std::size_t>(id)];
      if (type & (canopy_spm_control | canopy_spm_unknown))
        continue;
      const auto byte = type & canopy_spm_byte ? hf::fallback_byte(piece) : std::nullopt;
      if (byte) {
        slot = std::string(1, static_cast<char>(*byte));
        is_byte_[static_cast<std::size_t>(id)] = true;
      } else {
        slot = replace_space_symbol(piece);
      }
    }
    // Whether Decode drops the dummy-prefix space is in the normalizer spec, which the
    // processor API does not expose; ask SentencePiece instead, on a piece that starts
    // with a space and has more after it.
    for (int id = 0; id < size; ++id) {
      const auto& text = byte_vocab_[static_cast<std::size_t>(id)];
      if (text && !is_byte_[static_cast<std::size_t>(id)] && text->size() > 1 &&
          text->front() == ' ' && text->find_first_not_of(' ') != std::string::npos) {
        std::string decoded;
        if (plugin_.decode(model_, &id, 1, &append_to_string, nullptr, &decoded) == 0)
          strip_leading_space_ = decoded.empty() || decoded.front() != ' ';
        break;
      }
    }
  }

  ~sentencepiece_tokenizer() override { plugin_.free(model_); }
  sentencepiece_tokenizer(const sentencepiece_tokenizer&) = delete;
  sentencepiece_tokenizer& operator=(const sentencepiece_tokenizer&) = delete;

  using tokenizer_i::encode;
  std::vector<token_id> encode(std::string_view text,
                               bool add_special_tokens) const override {
    std::vector<token_id> ids;
    if (bos_ >= 0 && add_special_tokens)
      ids.push_back(bos_);
    std::string error;
    struct sinks {
      std::vector<token_id>* ids;
      std::string* error;
    } ctx{&ids, &error};
    const int rc = plugin_.encode(
        model_, text.data(), text.size(),
        [](void* c, const int* p, std::size_t n) {
          append_ids(static_cast<sinks*>(c)->ids, p, n);
        },
        [](void* c, const char* p, std::size_t n) {
          static_cast<sinks*>(c)->error->append(p, n);
        },
        &ctx);
    if (rc != 0)
      throw std::invalid_argument("SentencePiece encode failed: " + error);
    return ids;
  }

  std::string decode(const std::vector<token_id>& ids) const override {
    std::string out;
    bool first_text = true;
    for (token_id id : ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= byte_vocab_.size())
        throw std::invalid_argument(
            "token id " + std::to_string(id) + " is out of range [0, " +
            std::to_string(byte_vocab_.size()) + ") of the SentencePiece vocabulary");
      const auto& bytes = byte_vocab_[static_cast<std::size_t>(id)];
      if (!bytes || bytes->empty())
        continue;
      std::string_view piece = *bytes;
      // SentencePiece's Decode drops the dummy prefix from the first piece that has text.
      if (first_text && strip_leading_space_ && !is_byte_[static_cast<std::size_t>(id)] &&
          piece.front() == ' ')
        piece.remove_prefix(1);
      first_text = false;
      out += piece;
    }
    return out;
  }

  const std::vector<std::optional<std::string>>& byte_vocab() const override {
    return byte_vocab_;
  }
  std::string_view kind() const override { return "sentencepiece"; }

private:
  const plugin& plugin_;
  canopy_spm* model_ = nullptr;
  token_id bos_ = -1;
  bool strip_leading_space_ = true;
  std::vector<std::optional<std::string>> byte_vocab_;
  std::vector<bool> is_byte_;
};

} // namespace

bool sentencepiece_supported() {
  return the_plugin().error.empty();
}

std::unique_ptr<tokenizer_i>
load_sentencepiece_tokenizer(const std::filesystem::path& model_file) {
  return std::make_unique<sentencepiece_tokenizer>(model_file);
}

#else

bool sentencepiece_supported() {
  return false;
}

std::unique_ptr<tokenizer_i>
load_sentencepiece_tokenizer(const std::filesystem::path& model_file) {
  tokenizer_detail::fail(model_file,
                         "SentencePiece .model support was not built into Canopy "
                         "(install libsentencepiece-dev and re-run CMake)");
}

#endif

} // namespace canopy::backends
