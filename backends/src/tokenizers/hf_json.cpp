// tokenizer.json fields and patterns (see hf_json.hpp).
#include "tokenizers/hf_json.hpp"

namespace canopy::backends::hf {

json_node json_node::at(const char* key) const {
  if (!value_.is_object() || !value_.contains(key))
    fail(std::string("\"") + key + "\" is missing");
  return {value_.at(key), file_, where_ + "." + key};
}

json_node json_node::at(std::size_t index) const {
  return {value_.at(index), file_, where_ + "[" + std::to_string(index) + "]"};
}

std::string json_node::string(const char* key) const {
  const auto v = at(key);
  if (!v.value().is_string())
    v.fail("is not a string");
  return v.value().get<std::string>();
}

std::string json_node::string(const char* key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

bool json_node::boolean(const char* key, bool fallback) const {
  if (!has(key))
    return fallback;
  const auto v = at(key);
  if (!v.value().is_boolean())
    v.fail("is not true or false");
  return v.value().get<bool>();
}

std::int64_t json_node::integer(const char* key) const {
  const auto v = at(key);
  if (!v.value().is_number_integer())
    v.fail("is not an integer");
  return v.value().get<std::int64_t>();
}

std::vector<json_node> json_node::list(const char* key) const {
  const auto v = at(key);
  if (!v.value().is_array())
    v.fail("is not a list");
  std::vector<json_node> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(v.at(i));
  return out;
}

text_pattern::text_pattern(const json_node& spec) {
  if (spec.has("String")) {
    literal_ = spec.string("String");
    if (literal_.empty())
      spec.fail("an empty String pattern matches nothing");
  } else if (spec.has("Regex")) {
    try {
      regex_ = std::make_unique<pcre2_pattern>(spec.string("Regex"));
    } catch (const std::invalid_argument& e) {
      spec.fail(e.what());
    }
  } else {
    spec.fail("a pattern is {\"String\": ...} or {\"Regex\": ...}");
  }
}

std::vector<pcre2_pattern::match> text_pattern::find_all(std::string_view text) const {
  return regex_ ? regex_->find_all(text) : find_literal(text, literal_);
}

std::vector<pcre2_pattern::match> find_literal(std::string_view text,
                                               std::string_view literal) {
  std::vector<pcre2_pattern::match> out;
  for (auto at = text.find(literal); at != std::string_view::npos;
       at = text.find(literal, at + literal.size()))
    out.push_back({at, at + literal.size()});
  return out;
}

std::string replace_matches(std::string_view text,
                            const std::vector<pcre2_pattern::match>& matches,
                            std::string_view content) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (const auto& m : matches) {
    out.append(text.substr(at, m.begin - at));
    out.append(content);
    at = m.end;
  }
  out.append(text.substr(at));
  return out;
}

} // namespace canopy::backends::hf
