#pragma once
// Log-prob answers on the wire: JSON, or the binary format a client asks for with
// "Accept: application/octet-stream" (docs/http-api.md: "Binary log-prob format").
//
// Binary layout, every field little-endian:
//   offset  0  magic "CNPY" (4 bytes)
//           4  u16 version = 1
//           6  u8  dtype: 1 float32, 2 float16
//           7  u8  layout: 0 dense (cols = vocab), 1 top-k (cols = k)
//           8  u32 sequences   12 u32 rows   16 u32 cols   20 u32 vocab
//          24  u32 total_tokens   28 u32 reserved (0)
//          32  u32 length of each sequence          [sequences]
//              i32 token ids of every sequence       [total_tokens]
//              i32 top-k ids, row-major             [rows * cols]   (layout 1 only)
//              values, row-major                     [rows * cols]   (dtype)
// Rows come sequence by sequence; a sequence has one row (the distribution after
// all its tokens) or, with all_positions, one per token (row i: after tokens[0..i]).
// Top-k rows are sorted by value, largest first (ties: lower id first; NaN ranks
// as -inf).
//
// JSON: one sequence -> {"tokens": [...], "logprobs": ROW-OR-ROWS}; with top_k also
// "ids": IDS-OR-IDS beside "logprobs"; a batch -> {"results": [that, ...]}. ROW is a
// list of numbers (shortest text that reads back as the same float32; -inf and NaN,
// which JSON cannot hold, are written as null), ROWS a list of ROW.
// Thread contract: pure functions.

#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/types.hpp>
#include <canopy/server/api/api_requests.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace canopy::server {

/// One sequence's answer: its tokens and its rows (one, or one per position).
struct scored_sequence {
  cache::token_seq tokens;
  std::vector<cache::row_ptr> rows;
};

struct row_format {
  bool batch = false;               // {"results": [...]} in JSON
  bool all_positions = false;       // JSON nests rows one level deeper
  std::optional<std::size_t> top_k; // k larger than the vocabulary means the vocabulary
  wire_dtype dtype = wire_dtype::float32; // binary only; JSON is always float32 text
};

/// The size of an answer, known before it is computed.
struct answer_shape {
  std::size_t sequences = 0;
  std::size_t tokens = 0; // of all sequences
  std::size_t rows = 0;
  std::size_t vocab = 0;
  std::size_t longest = 0; // tokens the longest query carries (its sequence, and its
                           // cache partition: gateway_actor.hpp's partition_tokens)
};

/// The most bytes the answer can take once encoded (binary: exactly its size), so a
/// server can refuse or reserve it before computing anything.
std::size_t encoded_size_bound(const answer_shape& shape, const row_format& format,
                               bool binary);

/// Preconditions, std::invalid_argument when broken (a bug of the caller, not of the
/// client): in JSON, exactly one answer unless format.batch and exactly one row per
/// sequence unless format.all_positions; in binary, every row of one vocabulary and
/// every count within u32.
std::string encode_json(const std::vector<scored_sequence>& answers,
                        const row_format& format);
std::string encode_binary(const std::vector<scored_sequence>& answers,
                          const row_format& format);

} // namespace canopy::server
