// tokenizer.json post-processors (see hf_post_processor.hpp).
#include "tokenizers/hf_post_processor.hpp"

namespace canopy::backends::hf {

post_processor::post_processor(const json_node& spec) {
  if (!spec.value().is_null())
    read(spec);
}

void post_processor::read(const json_node& spec) {
  const auto type = spec.type();
  if (type == "ByteLevel")
    return;
  if (type == "Sequence") {
    for (const auto& part : spec.list("processors"))
      read(part);
    return;
  }
  if (type != "TemplateProcessing")
    spec.unsupported("post_processor", "TemplateProcessing, ByteLevel, Sequence");
  if (has_template_)
    spec.fail("a second TemplateProcessing is not supported");
  has_template_ = true;
  const auto specials = spec.at("special_tokens");
  for (const auto& item : spec.list("single")) {
    if (item.has("Sequence")) {
      if (item.at("Sequence").string("id") != "A")
        item.fail("a single-sequence template can only hold sequence A");
      single_.push_back(sequence_marker);
    } else if (item.has("SpecialToken")) {
      const auto name = item.at("SpecialToken").string("id");
      if (!specials.has(name.c_str()))
        item.fail("special token '" + name + "' is not in special_tokens");
      for (const auto& id : specials.at(name.c_str()).list("ids")) {
        if (!id.value().is_number_integer() || id.value().get<std::int64_t>() < 0)
          id.fail("is not a token id");
        single_.push_back(id.value().get<cache::token_id>());
      }
    } else {
      item.fail("a template item is {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
}

void post_processor::require_ids_below(std::size_t vocab, const json_node& spec) const {
  for (const auto id : single_)
    if (id != sequence_marker && static_cast<std::size_t>(id) >= vocab)
      spec.fail("holds special token id " + std::to_string(id) +
                ", outside the vocabulary of " + std::to_string(vocab) + " ids");
}

std::vector<cache::token_id>
post_processor::apply(std::vector<cache::token_id> ids) const {
  if (!has_template_)
    return ids;
  std::vector<cache::token_id> out;
  out.reserve(ids.size() + single_.size());
  for (const auto id : single_)
    if (id == sequence_marker)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.push_back(id);
  return out;
}

} // namespace canopy::backends::hf
