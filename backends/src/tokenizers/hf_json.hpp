#pragma once
// Reading one component of a tokenizer.json: typed fields with errors that name the file,
// where in it ("pre_tokenizer.pretokenizers[0]") and what is wrong; and the text patterns
// ({"String": ...} or {"Regex": ...}) that several components share. Internal to
// canopy_backends.
// Thread contract: a json_node is a view used while loading; a text_pattern is immutable
// after construction and may be used from many threads.

#include "tokenizers/pcre2_pattern.hpp"

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends::hf {

class json_node {
public:
  json_node(const nlohmann::json& value, std::string file, std::string where)
      : value_(value), file_(std::move(file)), where_(std::move(where)) {}

  const nlohmann::json& value() const { return value_; }
  const std::string& where() const { return where_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw tokenizer_error(file_ + ": " + where_ + ": " + what);
  }
  /// A component type this build does not implement: refused by name, never approximated.
  [[noreturn]] void unsupported(const std::string& kind,
                                const std::string& supported) const {
    fail(kind + " type '" + type() + "' is not supported (supported: " + supported + ")");
  }

  bool has(const char* key) const {
    return value_.is_object() && value_.contains(key) && !value_.at(key).is_null();
  }
  json_node at(const char* key) const;
  json_node at(std::size_t index) const;
  std::size_t size() const { return value_.size(); }

  std::string type() const { return string("type"); }
  std::string string(const char* key) const;
  std::string string(const char* key, const std::string& fallback) const;
  bool boolean(const char* key, bool fallback) const;
  std::int64_t integer(const char* key) const;
  std::vector<json_node> list(const char* key) const;

private:
  const nlohmann::json& value_;
  std::string file_, where_;
};

/// Every non-overlapping occurrence of `literal` (non-empty) in `text`, left to right.
std::vector<pcre2_pattern::match> find_literal(std::string_view text,
                                               std::string_view literal);

/// `text` with every one of `matches` replaced by `content`.
std::string replace_matches(std::string_view text,
                            const std::vector<pcre2_pattern::match>& matches,
                            std::string_view content);

/// A tokenizer.json pattern: {"String": s} matches s literally, {"Regex": r} the regular
/// expression r.
class text_pattern {
public:
  explicit text_pattern(const json_node& spec);
  std::vector<pcre2_pattern::match> find_all(std::string_view text) const;
  /// `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const {
    return replace_matches(text, find_all(text), content);
  }

private:
  std::string literal_;
  std::unique_ptr<pcre2_pattern> regex_; // null: literal
};

} // namespace canopy::backends::hf
