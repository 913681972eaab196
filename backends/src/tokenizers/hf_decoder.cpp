// tokenizer.json decoders (see hf_decoder.hpp).
#include "tokenizers/hf_decoder.hpp"

#include "tokenizers/hf_pieces.hpp"
#include "tokenizers/utf8.hpp"

#include <canopy/backends/tokenizers/byte_level_alphabet.hpp>
#include <canopy/backends/tokenizers/valid_utf8.hpp>

namespace canopy::backends::hf {

namespace {

const std::string replacement_character = "\xEF\xBF\xBD"; // U+FFFD

class byte_level final : public decoder {
public:
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      // A token spelled outside the alphabet (an added token) stands for its own bytes.
      auto raw = byte_level_piece_bytes(t);
      bytes += raw ? *raw : t;
    }
    return {lossy_utf8(bytes)};
  }
};

class byte_fallback final : public decoder {
public:
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string run; // bytes of consecutive <0xHH> tokens
    std::size_t run_tokens = 0;
    const auto flush = [&] {
      if (run_tokens == 0)
        return;
      if (valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (std::size_t i = 0; i < run_tokens; ++i)
          out.push_back(replacement_character);
      }
      run.clear();
      run_tokens = 0;
    };
    for (auto& t : tokens) {
      if (const auto b = fallback_byte(t)) {
        run += static_cast<char>(*b);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  }
};

class fuse final : public decoder {
public:
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    std::string all;
    for (const auto& t : tokens)
      all += t;
    return {all};
  }
};

class strip final : public decoder {
public:
  explicit strip(const json_node& spec)
      : content_(spec.string("content")), start_(spec.integer("start")),
        stop_(spec.integer("stop")) {
    std::size_t at = 0;
    if (content_.empty() || !utf8::next(content_, at) || at != content_.size())
      spec.at("content").fail("is not one character");
  }
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) {
      std::size_t begin = 0, end = t.size();
      for (std::int64_t i = 0;
           i < start_ && t.compare(begin, content_.size(), content_) == 0; ++i)
        begin += content_.size();
      for (std::int64_t i = 0;
           i < stop_ && end >= begin + content_.size() &&
           t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
    return tokens;
  }

private:
  std::string content_;
  std::int64_t start_, stop_;
};

class replace final : public decoder {
public:
  explicit replace(const json_node& spec)
      : pattern_(spec.at("pattern")), content_(spec.string("content")) {}
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (auto& t : tokens)
      t = pattern_.replace_all(t, content_);
    return tokens;
  }

private:
  text_pattern pattern_;
  std::string content_;
};

class metaspace_to_spaces final : public decoder {
public:
  explicit metaspace_to_spaces(const json_node& spec)
      : replacement_(spec.string("replacement")) {
    const auto scheme = spec.string(
        "prepend_scheme", spec.boolean("add_prefix_space", true) ? "always" : "never");
    strip_first_ = scheme != "never";
  }
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      t = replace_matches(t, find_literal(t, replacement_), " ");
      if (i == 0 && strip_first_ && !t.empty() && t.front() == ' ')
        t.erase(0, 1);
    }
    return tokens;
  }

private:
  std::string replacement_;
  bool strip_first_;
};

class sequence final : public decoder {
public:
  explicit sequence(const json_node& spec) {
    for (const auto& part : spec.list("decoders"))
      if (auto d = make_decoder(part))
        parts_.push_back(std::move(d));
  }
  std::vector<std::string> decode(std::vector<std::string> tokens) const override {
    for (const auto& part : parts_)
      tokens = part->decode(std::move(tokens));
    return tokens;
  }

private:
  std::vector<std::unique_ptr<const decoder>> parts_;
};

} // namespace

std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t start = at;
    if (utf8::next(bytes, at)) {
      out.append(bytes.substr(start, at - start));
      continue;
    }
    // The maximal prefix of a valid sequence is one error (Unicode's "substitution of
    // maximal subparts", which Rust follows): a lead byte and the continuation bytes
    // that could still have completed it.
    const auto b0 = static_cast<unsigned char>(bytes[start]);
    std::size_t need = b0 >= 0xC2 && b0 <= 0xDF   ? 1
                       : b0 >= 0xE0 && b0 <= 0xEF ? 2
                       : b0 >= 0xF0 && b0 <= 0xF4 ? 3
                                                  : 0;
    at = start + 1;
    for (std::size_t i = 0; i < need && at < bytes.size(); ++i, ++at) {
      const auto b = static_cast<unsigned char>(bytes[at]);
      unsigned char low = 0x80, high = 0xBF;
      if (i == 0) {
        if (b0 == 0xE0)
          low = 0xA0;
        if (b0 == 0xED)
          high = 0x9F;
        if (b0 == 0xF0)
          low = 0x90;
        if (b0 == 0xF4)
          high = 0x8F;
      }
      if (b < low || b > high)
        break;
    }
    out += replacement_character;
  }
  return out;
}

std::unique_ptr<const decoder> make_decoder(const json_node& spec) {
  if (spec.value().is_null())
    return nullptr;
  const auto type = spec.type();
  if (type == "ByteLevel")
    return std::make_unique<byte_level>();
  if (type == "ByteFallback")
    return std::make_unique<byte_fallback>();
  if (type == "Fuse")
    return std::make_unique<fuse>();
  if (type == "Strip")
    return std::make_unique<strip>(spec);
  if (type == "Replace")
    return std::make_unique<replace>(spec);
  if (type == "Metaspace")
    return std::make_unique<metaspace_to_spaces>(spec);
  if (type == "Sequence")
    return std::make_unique<sequence>(spec);
  spec.unsupported("decoder", "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, "
                              "Sequence");
}

} // namespace canopy::backends::hf
