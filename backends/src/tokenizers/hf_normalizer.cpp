// tokenizer.json normalizers (see hf_normalizer.hpp).
#include "tokenizers/hf_normalizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace canopy::backends::hf {

namespace {

bool is_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

class unicode_form final : public normalizer {
public:
  explicit unicode_form(utf8proc_option_t options) : options_(options) {}
  void apply(std::string& text) const override {
    if (is_ascii(text)) // every normal form of ASCII is itself
      return;
    utf8proc_uint8_t* out = nullptr;
    const auto n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &out, options_);
    if (n < 0)
      throw std::invalid_argument(std::string("text cannot be normalized: ") +
                                  utf8proc_errmsg(n));
    text.assign(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
    std::free(out);
  }

private:
  utf8proc_option_t options_;
};

class prepend final : public normalizer {
public:
  explicit prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty())
      text.insert(0, prefix_);
  }

private:
  std::string prefix_;
};

class replace final : public normalizer {
public:
  explicit replace(const json_node& spec)
      : pattern_(spec.at("pattern")), content_(spec.string("content")) {}
  void apply(std::string& text) const override {
    text = pattern_.replace_all(text, content_);
  }

private:
  text_pattern pattern_;
  std::string content_;
};

class sequence final : public normalizer {
public:
  explicit sequence(const json_node& spec) {
    for (const auto& part : spec.list("normalizers"))
      if (auto n = make_normalizer(part))
        parts_.push_back(std::move(n));
  }
  void apply(std::string& text) const override {
    for (const auto& part : parts_)
      part->apply(text);
  }

private:
  std::vector<std::unique_ptr<const normalizer>> parts_;
};

} // namespace

std::unique_ptr<const normalizer> make_normalizer(const json_node& spec) {
  if (spec.value().is_null())
    return nullptr;
  const auto type = spec.type();
  const auto stable = UTF8PROC_STABLE;
  if (type == "NFC")
    return std::make_unique<unicode_form>(utf8proc_option_t(stable | UTF8PROC_COMPOSE));
  if (type == "NFD")
    return std::make_unique<unicode_form>(utf8proc_option_t(stable | UTF8PROC_DECOMPOSE));
  if (type == "NFKC")
    return std::make_unique<unicode_form>(
        utf8proc_option_t(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  if (type == "NFKD")
    return std::make_unique<unicode_form>(
        utf8proc_option_t(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
  if (type == "Prepend")
    return std::make_unique<prepend>(spec.string("prepend"));
  if (type == "Replace")
    return std::make_unique<replace>(spec);
  if (type == "Sequence")
    return std::make_unique<sequence>(spec);
  spec.unsupported("normalizer", "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
}

} // namespace canopy::backends::hf
