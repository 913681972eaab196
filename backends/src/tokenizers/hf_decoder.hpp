#pragma once
// tokenizer.json decoders, turning token strings back into text as the HF tokenizers do:
// ByteLevel (alphabet characters back to bytes, invalid UTF-8 replaced as Rust's
// from_utf8_lossy does), ByteFallback (<0xHH> runs to bytes, U+FFFD per byte of a run
// that is not UTF-8), Fuse, Strip, Replace, Metaspace and Sequence. Others are refused by
// name. Internal to canopy_backends. Thread contract: immutable after construction;
// decode() from many threads.

#include "tokenizers/hf_json.hpp"

#include <memory>
#include <string>
#include <vector>

namespace canopy::backends::hf {

class decoder {
public:
  virtual ~decoder() = default;
  /// HF's decode_chain: the token strings after this decoder.
  virtual std::vector<std::string> decode(std::vector<std::string> tokens) const = 0;
};

/// The decoder `spec` describes; nullptr for a null spec (tokens joined by spaces).
std::unique_ptr<const decoder> make_decoder(const json_node& spec);

/// `bytes` as valid UTF-8, each maximal invalid subsequence replaced by U+FFFD (Rust's
/// String::from_utf8_lossy).
std::string lossy_utf8(std::string_view bytes);

} // namespace canopy::backends::hf
