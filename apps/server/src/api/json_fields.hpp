#pragma once
// Reading request bodies (private to the request parsers): the body as a JSON object of
// bounded depth, and typed field readers whose errors name the field. The readers
// throw `refusal`; the parse_* functions catch it at their boundary, so each request
// parser reads as a plain list of its fields and nothing escapes to the caller.
// Thread contract: pure functions.

#include <canopy/cache/types.hpp>
#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/api_error.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace canopy::server::detail {

/// A request refused with a 400; thrown by the readers below, caught by parse_*.
struct refusal {
  api_error error;
};

[[noreturn]] void refuse(std::string_view code, std::string message);

/// Runs a parser; a refusal becomes the error it carries. The only place a refusal is
/// caught, so no parse_* function throws.
template <class T, class Parse> std::variant<T, api_error> catching(const Parse& parse) {
  try {
    return parse();
  } catch (refusal& r) {
    return std::move(r.error);
  }
}

/// Deepest nesting a body may have. The deepest request is {"batch": [[ids]]} (3).
/// nlohmann 3.11 parses and destroys iteratively, but copying, comparing and dumping a
/// value recurse per level; the bound keeps every use of a parsed body safe.
inline constexpr std::size_t max_body_depth = 8;

/// The body as a JSON object: malformed_json (with the parser's position) when it is
/// not JSON, invalid_request when it nests deeper than max_body_depth or is not an
/// object. `empty_is_object`: a body of only whitespace reads as {}.
nlohmann::json parse_object(std::string_view body, bool empty_is_object);

/// Refuses the first member of `object` whose name is not in `known`.
void allow_only(const nlohmann::json& object,
                std::initializer_list<std::string_view> known);

/// The member `name` of `object`, or nullptr when absent.
const nlohmann::json* member(const nlohmann::json& object, const char* name);
/// The member `name` of `object`; invalid_request "<name> is required" when absent.
const nlohmann::json& required(const nlohmann::json& object, const char* name);

// Typed readers: each refuses with invalid_request "<field> is not a ..." on a wrong
// type. JSON integers are numbers without a fraction that nlohmann stores as
// integers; numbers it had to store as floats because they exceed 64 bits are
// integers out of any range we accept, not fractions.
bool read_bool(const nlohmann::json& value, const std::string& field);
std::string read_string(const nlohmann::json& value, const std::string& field);
/// Any JSON number, which must be finite.
double read_number(const nlohmann::json& value, const std::string& field);
/// An int32; `range_code` when the integer is outside the range.
std::int32_t read_int32(const nlohmann::json& value, const std::string& field,
                        std::string_view range_code);
std::uint64_t read_uint64(const nlohmann::json& value, const std::string& field);
/// An integer in [lo, hi]: "<field> must be at least lo" / "... at most hi".
std::uint64_t read_count(const nlohmann::json& value, const std::string& field,
                         std::uint64_t lo, std::uint64_t hi);
/// A list of token ids: each an int32 (token_out_of_range outside it, naming
/// "<field>[i]"); an empty list is empty_sequence unless `allow_empty`.
cache::token_seq read_tokens(const nlohmann::json& value, const std::string& field,
                             bool allow_empty);
/// The optional "cache_salt" of `object`: "" when absent; else a non-empty string of
/// at most max_cache_salt_bytes (cache_partition.hpp), without NUL.
std::string read_cache_salt(const nlohmann::json& object);
/// "adapter": a non-empty adapter name; "" when absent.
std::string read_adapter(const nlohmann::json& object);
/// One sequence of a list: a non-empty list of token ids, or a text; refuses anything
/// else as "<field> is neither a list of token ids nor a text".
sequence_input read_sequence(const nlohmann::json& value, const std::string& field);

} // namespace canopy::server::detail
