#pragma once
// tokenizer.json post-processors, for one sequence with add_special_tokens:
// TemplateProcessing ("single": special tokens around the sequence $A), ByteLevel (which
// changes only offsets, so no ids) and Sequence. Others are refused by name.
// Internal to canopy_backends.
// Thread contract: immutable after construction; apply() from many threads.

#include "tokenizers/hf_json.hpp"

#include <canopy/cache/types.hpp>

#include <vector>

namespace canopy::backends::hf {

class post_processor {
public:
  /// A null spec adds nothing.
  explicit post_processor(const json_node& spec);
  /// Throws (through `spec`, this post-processor's node) when a special token's id is
  /// not one of the tokenizer's `vocab` ids: every text would fail to encode.
  void require_ids_below(std::size_t vocab, const json_node& spec) const;
  /// The ids of one encoded sequence with the template's special tokens around them.
  std::vector<cache::token_id> apply(std::vector<cache::token_id> ids) const;

private:
  void read(const json_node& spec);
  // The single-sequence template: ids, with `sequence_marker` where $A goes.
  std::vector<cache::token_id> single_;
  bool has_template_ = false;
  static constexpr cache::token_id sequence_marker = -1;
};

} // namespace canopy::backends::hf
