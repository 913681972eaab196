// tokenizer.json's added tokens (see hf_added_tokens.hpp).
#include "tokenizers/hf_added_tokens.hpp"

#include "tokenizers/utf8.hpp"

#include <algorithm>
#include <limits>

namespace canopy::backends::hf {

std::size_t whitespace_at(std::string_view text, std::size_t at) {
  std::size_t end = at;
  const auto cp = utf8::next(text, end);
  if (!cp)
    return 0;
  const char32_t c = *cp;
  const bool space = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
                     c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
                     c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
  return space ? end - at : 0;
}

added_tokens::added_tokens(const json_node& list) {
  if (list.value().is_null())
    return;
  if (!list.value().is_array())
    list.fail("is not a list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto entry = list.at(i);
    added_token t;
    const auto id = entry.integer("id");
    if (id < 0 || id > std::numeric_limits<cache::token_id>::max())
      entry.at("id").fail("is out of range");
    t.id = static_cast<cache::token_id>(id);
    t.content = entry.string("content");
    if (t.content.empty())
      entry.at("content").fail("is empty");
    t.special = entry.boolean("special", false);
    t.normalized = entry.boolean("normalized", !t.special);
    t.lstrip = entry.boolean("lstrip", false);
    t.rstrip = entry.boolean("rstrip", false);
    if (entry.boolean("single_word", false))
      entry.at("single_word").fail("true is not supported");
    any_normalized_ = any_normalized_ || t.normalized;
    tokens_.push_back(std::move(t));
  }
  for (const auto& t : tokens_)
    by_first_byte_[static_cast<unsigned char>(t.content.front())].push_back(&t);
  for (auto& bucket : by_first_byte_)
    std::stable_sort(bucket.begin(), bucket.end(), [](const auto* a, const auto* b) {
      return a->content.size() > b->content.size();
    });
}

const added_token* added_tokens::longest_at(std::string_view text, std::size_t at,
                                            bool normalized) const {
  for (const auto* t : by_first_byte_[static_cast<unsigned char>(text[at])])
    if (t->normalized == normalized &&
        text.compare(at, t->content.size(), t->content) == 0)
      return t;
  return nullptr;
}

std::vector<text_part> added_tokens::split(std::string_view text, bool normalized) const {
  std::vector<text_part> parts;
  std::size_t plain_from = 0; // where the text not yet taken begins
  for (std::size_t at = 0; at < text.size();) {
    const auto* t = longest_at(text, at, normalized);
    if (t == nullptr) {
      ++at;
      continue;
    }
    std::size_t begin = at, end = at + t->content.size();
    if (t->lstrip) { // whitespace before it, back to the text already taken
      while (begin > plain_from) {
        std::size_t back = begin - 1;
        while (back > plain_from &&
               (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80)
          --back;
        if (whitespace_at(text, back) != begin - back)
          break;
        begin = back;
      }
    }
    if (t->rstrip) {
      while (end < text.size()) {
        const auto n = whitespace_at(text, end);
        if (n == 0)
          break;
        end += n;
      }
    }
    if (begin > plain_from)
      parts.push_back({text.substr(plain_from, begin - plain_from), std::nullopt});
    parts.push_back({text.substr(begin, end - begin), t->id});
    plain_from = at = end;
  }
  if (plain_from < text.size())
    parts.push_back({text.substr(plain_from), std::nullopt});
  return parts;
}

} // namespace canopy::backends::hf
