#pragma once
// A strict JSON reader that walks a document in place, without building it and
// without converting numbers it is not asked for. The load generator checks every
// JSON answer, a row of a few thousand numbers; nlohmann's reader converts each (with
// strtod), which cost the client about as much CPU as the server spent writing them.
// Thread contract: one per document, on one thread.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace canopy::app {

class json_scanner {
public:
  explicit json_scanner(std::string_view text)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  /// Where reading stopped: the byte at fault after a failed call.
  std::size_t offset() const { return static_cast<std::size_t>(p_ - begin_); }
  /// Whether only whitespace is left.
  bool at_end();
  /// Consumes `c` (after whitespace) when it is next.
  bool eat(char c);
  /// Whether `c` is next (after whitespace), without consuming it.
  bool peek(char c);
  /// A string; its raw contents (escapes as written) in `out`.
  bool string(std::string_view& out);
  /// A number, by JSON's grammar; `integer` holds its value when it is an integer that
  /// fits, else is false.
  bool number(bool& is_integer, std::int64_t& integer);
  /// The literal `word` (null, true, false).
  bool literal(std::string_view word);
  /// Any value, checked and skipped; `depth` bounds nesting.
  bool skip_value(int depth = 64);

private:
  void skip_whitespace();
  bool digits();

  const char* begin_;
  const char* p_;
  const char* end_;
};

} // namespace canopy::app
