#include <canopy/server/api/row_encoding.hpp>

#include "api/row_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace canopy::server {

namespace {

void check(bool condition, const char* what) {
  if (!condition)
    throw std::invalid_argument(what);
}

// ---- JSON ----

void append_number(std::string& out, float value) {
  if (!std::isfinite(value)) { // JSON has no -inf or NaN
    out += "null";
    return;
  }
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out.append(buffer, end);
}

void append_number(std::string& out, std::int32_t value) {
  char buffer[16];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out.append(buffer, end);
}

template <class T> void append_list(std::string& out, const T* values, std::size_t n) {
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0)
      out += ',';
    append_number(out, values[i]);
  }
  out += ']';
}

/// {"tokens": [...], "logprobs": ROW-OR-ROWS[, "ids": IDS-OR-IDS]}. The ids are
/// written into `ids` beside the values, so each row is selected once.
void append_sequence(std::string& out, const scored_sequence& answer,
                     const row_format& format, row_reader& reader, std::string& ids) {
  check(format.all_positions || answer.rows.size() == 1,
        "encode_json: a sequence without all_positions must have exactly one row");
  out += "{\"tokens\":";
  append_list(out, answer.tokens.data(), answer.tokens.size());
  out += ",\"logprobs\":";
  ids.clear();
  if (format.all_positions) {
    out += '[';
    ids += '[';
  }
  for (std::size_t r = 0; r < answer.rows.size(); ++r) {
    if (r > 0) {
      out += ',';
      ids += ',';
    }
    const row_reader::view row = reader.read(*answer.rows[r]);
    append_list(out, row.values, row.cols);
    if (row.ids != nullptr)
      append_list(ids, row.ids, row.cols);
  }
  if (format.all_positions) {
    out += ']';
    ids += ']';
  }
  if (format.top_k) {
    out += ",\"ids\":";
    out += ids;
  }
  out += '}';
}

// ---- binary ----

char* put_u16(char* at, std::uint16_t v) {
  at[0] = static_cast<char>(v & 0xff);
  at[1] = static_cast<char>(v >> 8);
  return at + 2;
}

char* put_u32(char* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return at + 4;
}

std::uint32_t to_u32(std::size_t n) {
  check(n <= std::numeric_limits<std::uint32_t>::max(),
        "encode_binary: a count does not fit the format's u32");
  return static_cast<std::uint32_t>(n);
}

char* put_values(char* at, const float* values, std::size_t n, wire_dtype dtype) {
  if (dtype == wire_dtype::float16) {
    for (std::size_t i = 0; i < n; ++i)
      at = put_u16(at, cache::float_to_half(values[i]));
    return at;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    at = put_u32(at, bits);
  }
  return at;
}

} // namespace

std::size_t encoded_size_bound(const answer_shape& shape, const row_format& format,
                               bool binary) {
  const std::size_t cols =
      format.top_k ? std::min(*format.top_k, shape.vocab) : shape.vocab;
  if (binary) {
    const std::size_t element = format.dtype == wire_dtype::float16 ? 2 : 4;
    const std::size_t id_bytes = format.top_k ? 4 * shape.rows * cols : 0;
    return 32 + 4 * shape.sequences + 4 * shape.tokens + id_bytes +
           element * shape.rows * cols;
  }
  // A value is at most "-1.17549435e-38," (16 characters), an id or token
  // "-2147483648," (12); a row adds at most "[],[]," (6); a sequence its keys and
  // brackets (under 64); a batch {"results":[]} (14).
  const std::size_t per_value = 16 + (format.top_k ? 12 : 0);
  return 16 + 64 * shape.sequences + 12 * shape.tokens + 6 * shape.rows +
         per_value * shape.rows * cols;
}

std::string encode_json(const std::vector<scored_sequence>& answers,
                        const row_format& format) {
  check(format.batch || answers.size() == 1,
        "encode_json: a response that is not a batch has exactly one answer");
  answer_shape shape{answers.size(), 0, 0, 0};
  for (const scored_sequence& answer : answers) {
    shape.tokens += answer.tokens.size();
    shape.rows += answer.rows.size();
    for (const cache::row_ptr& row : answer.rows)
      shape.vocab = std::max(shape.vocab, row->vocab());
  }
  // Reserved whole, so the text never doubles its buffer on the way.
  std::string out;
  out.reserve(encoded_size_bound(shape, format, false));
  std::string ids;
  row_reader reader(format.top_k);
  if (format.batch)
    out += "{\"results\":[";
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (i > 0)
      out += ',';
    append_sequence(out, answers[i], format, reader, ids);
  }
  if (format.batch)
    out += "]}";
  return out;
}

std::string encode_binary(const std::vector<scored_sequence>& answers,
                          const row_format& format) {
  std::size_t rows = 0, total_tokens = 0, vocab = 0;
  for (const scored_sequence& answer : answers) {
    if (rows == 0 && !answer.rows.empty())
      vocab = answer.rows.front()->vocab();
    rows += answer.rows.size();
    total_tokens += answer.tokens.size();
  }
  const std::size_t cols = format.top_k ? std::min(*format.top_k, vocab) : vocab;
  const std::size_t id_bytes = format.top_k ? 4 * rows * cols : 0;

  std::string out(
      encoded_size_bound({answers.size(), total_tokens, rows, vocab}, format, true),
      '\0');
  char* at = out.data();
  std::memcpy(at, "CNPY", 4);
  put_u16(at + 4, 1);
  at[6] = static_cast<char>(format.dtype == wire_dtype::float16 ? 2 : 1);
  at[7] = static_cast<char>(format.top_k ? 1 : 0);
  at = put_u32(at + 8, to_u32(answers.size()));
  at = put_u32(at, to_u32(rows));
  at = put_u32(at, to_u32(cols));
  at = put_u32(at, to_u32(vocab));
  at = put_u32(at, to_u32(total_tokens));
  at = put_u32(at, 0); // reserved
  for (const scored_sequence& answer : answers)
    at = put_u32(at, to_u32(answer.tokens.size()));
  for (const scored_sequence& answer : answers)
    for (cache::token_id token : answer.tokens)
      at = put_u32(at, static_cast<std::uint32_t>(token));

  // Ids and values are separate sections; each row writes its part of both.
  char* ids_at = at;
  char* values_at = at + id_bytes;
  row_reader reader(format.top_k);
  for (const scored_sequence& answer : answers)
    for (const cache::row_ptr& row : answer.rows) {
      check(row->vocab() == vocab, "encode_binary: rows of different vocabularies");
      const row_reader::view view = reader.read(*row);
      for (std::size_t i = 0; view.ids != nullptr && i < view.cols; ++i)
        ids_at = put_u32(ids_at, static_cast<std::uint32_t>(view.ids[i]));
      values_at = put_values(values_at, view.values, view.cols, format.dtype);
    }
  return out;
}

} // namespace canopy::server
