// tokenizer.json pre-tokenizers (see hf_pre_tokenizer.hpp).
#include "tokenizers/hf_pre_tokenizer.hpp"

#include "tokenizers/gpt2_pretokenizer.hpp"

namespace canopy::backends::hf {

namespace {

enum class behavior {
  removed,
  isolated,
  merged_with_previous,
  merged_with_next,
  contiguous
};

struct span {
  std::size_t begin, end;
  bool is_match;
};

behavior read_behavior(const json_node& spec) {
  const auto name = spec.string("behavior");
  if (name == "Removed")
    return behavior::removed;
  if (name == "Isolated")
    return behavior::isolated;
  if (name == "MergedWithPrevious")
    return behavior::merged_with_previous;
  if (name == "MergedWithNext")
    return behavior::merged_with_next;
  if (name == "Contiguous")
    return behavior::contiguous;
  spec.at("behavior")
      .fail("'" + name +
            "' is not a split behaviour (Removed, Isolated, "
            "MergedWithPrevious, MergedWithNext, Contiguous)");
}

/// The matches and the gaps between them, tiling [0, size).
std::vector<span> tile(const std::vector<pcre2_pattern::match>& matches, std::size_t size,
                       bool invert) {
  std::vector<span> out;
  std::size_t at = 0;
  for (const auto& m : matches) {
    if (m.begin > at)
      out.push_back({at, m.begin, invert});
    out.push_back({m.begin, m.end, !invert});
    at = m.end;
  }
  if (at < size)
    out.push_back({at, size, invert});
  return out;
}

/// HF's NormalizedString::split: which spans become pieces under `how`.
std::vector<span> apply_behavior(std::vector<span> spans, behavior how) {
  std::vector<span> out;
  bool previous_match = false;
  switch (how) {
  case behavior::isolated:
    return spans;
  case behavior::removed:
    for (const auto& s : spans)
      if (!s.is_match)
        out.push_back(s);
    return out;
  case behavior::merged_with_previous:
    for (const auto& s : spans) {
      if (s.is_match && !previous_match && !out.empty())
        out.back().end = s.end;
      else
        out.push_back(s);
      previous_match = s.is_match;
    }
    return out;
  case behavior::merged_with_next:
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->is_match && !previous_match && !out.empty())
        out.back().begin = it->begin;
      else
        out.push_back(*it);
      previous_match = it->is_match;
    }
    return {out.rbegin(), out.rend()};
  case behavior::contiguous:
    for (const auto& s : spans) {
      if (s.is_match == previous_match && !out.empty())
        out.back().end = s.end;
      else
        out.push_back(s);
      previous_match = s.is_match;
    }
    return out;
  }
  return out;
}

/// Replaces each word by its pieces under `pieces_of`.
template <class Pieces> void split_each(std::vector<word>& words, Pieces pieces_of) {
  std::vector<word> out;
  out.reserve(words.size());
  for (auto& w : words) {
    const bool first = w.at_start;
    for (const auto& s : pieces_of(w.text)) {
      if (s.end > s.begin)
        out.push_back({w.text.substr(s.begin, s.end - s.begin), first && s.begin == 0});
    }
  }
  words.swap(out);
}

class split_by_pattern final : public pre_tokenizer {
public:
  explicit split_by_pattern(const json_node& spec)
      : pattern_(spec.at("pattern")), behavior_(read_behavior(spec)),
        invert_(spec.boolean("invert", false)) {}
  void split(std::vector<word>& words) const override {
    split_each(words, [&](const std::string& text) {
      return apply_behavior(tile(pattern_.find_all(text), text.size(), invert_),
                            behavior_);
    });
  }

private:
  text_pattern pattern_;
  behavior behavior_;
  bool invert_;
};

class byte_level_split final : public pre_tokenizer {
public:
  explicit byte_level_split(const json_node& spec)
      : add_prefix_space_(spec.boolean("add_prefix_space", true)),
        use_regex_(spec.boolean("use_regex", true)) {}
  void split(std::vector<word>& words) const override {
    if (add_prefix_space_)
      for (auto& w : words)
        if (w.text.empty() || w.text.front() != ' ')
          w.text.insert(0, " ");
    if (use_regex_)
      split_each(words, [&](const std::string& text) {
        return tile(gpt2_.find_all(text), text.size(), false);
      });
  }
  bool byte_level() const override { return true; }

private:
  pcre2_pattern gpt2_{gpt2_pretokenizer::pattern};
  bool add_prefix_space_, use_regex_;
};

class metaspace final : public pre_tokenizer {
public:
  explicit metaspace(const json_node& spec)
      : replacement_(spec.string("replacement")), split_(spec.boolean("split", true)) {
    if (replacement_.empty())
      spec.at("replacement").fail("is empty");
    if (spec.has("prepend_scheme")) {
      scheme_ = spec.string("prepend_scheme");
      if (scheme_ != "always" && scheme_ != "first" && scheme_ != "never")
        spec.at("prepend_scheme").fail("'" + scheme_ + "' is not always, first or never");
    } else {
      scheme_ = spec.boolean("add_prefix_space", true) ? "always" : "never";
    }
  }
  void split(std::vector<word>& words) const override {
    for (auto& w : words) {
      w.text = replace_matches(w.text, find_literal(w.text, " "), replacement_);
      const bool prepend = scheme_ == "always" || (scheme_ == "first" && w.at_start);
      if (prepend && w.text.compare(0, replacement_.size(), replacement_) != 0)
        w.text.insert(0, replacement_);
    }
    if (split_)
      split_each(words, [&](const std::string& text) {
        return apply_behavior(tile(find_literal(text, replacement_), text.size(), false),
                              behavior::merged_with_next);
      });
  }

private:
  std::string replacement_;
  std::string scheme_;
  bool split_;
};

class sequence final : public pre_tokenizer {
public:
  explicit sequence(const json_node& spec) {
    const auto parts = spec.list("pretokenizers");
    for (std::size_t i = 0; i < parts.size(); ++i) {
      auto p = make_pre_tokenizer(parts[i]);
      if (!p)
        continue;
      if (!parts_.empty() && parts_.back()->byte_level())
        parts[i].fail("a pre-tokenizer after ByteLevel is not supported");
      parts_.push_back(std::move(p));
    }
  }
  void split(std::vector<word>& words) const override {
    for (const auto& part : parts_)
      part->split(words);
  }
  bool byte_level() const override {
    return !parts_.empty() && parts_.back()->byte_level();
  }

private:
  std::vector<std::unique_ptr<const pre_tokenizer>> parts_;
};

} // namespace

std::unique_ptr<const pre_tokenizer> make_pre_tokenizer(const json_node& spec) {
  if (spec.value().is_null())
    return nullptr;
  const auto type = spec.type();
  if (type == "Split")
    return std::make_unique<split_by_pattern>(spec);
  if (type == "ByteLevel")
    return std::make_unique<byte_level_split>(spec);
  if (type == "Metaspace")
    return std::make_unique<metaspace>(spec);
  if (type == "Sequence")
    return std::make_unique<sequence>(spec);
  spec.unsupported("pre_tokenizer", "Split, ByteLevel, Metaspace, Sequence");
}

} // namespace canopy::backends::hf
