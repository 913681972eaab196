// PCRE2 patterns (see pcre2_pattern.hpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizers/pcre2_pattern.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace canopy::backends {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? "PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<const char*>(buffer),
                             static_cast<std::size_t>(n));
}

} // namespace

struct pcre2_pattern::compiled {
  pcre2_code* code = nullptr;
  ~compiled() { pcre2_code_free(code); }
};

pcre2_pattern::pcre2_pattern(std::string_view pattern)
    : compiled_(std::make_unique<compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: invalid UTF-8 in the subject is skipped instead of failing the
  // match.
  compiled_->code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (compiled_->code == nullptr)
    throw std::invalid_argument("regular expression rejected by PCRE2 at offset " +
                                std::to_string(offset) + ": " + pcre2_message(error));
  // JIT is a speed-up only; without it (unsupported platform) the interpreter gives the
  // same matches, so the result is deliberately ignored.
  (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

pcre2_pattern::~pcre2_pattern() = default;

std::vector<pcre2_pattern::match> pcre2_pattern::find_all(std::string_view text) const {
  std::vector<match> out;
  if (text.empty())
    return out;
  // Match data is per call: that is what makes find_all() safe from many threads.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr),
      &pcre2_match_data_free);
  if (!data)
    throw std::bad_alloc();
  // PCRE2's default match limit (10 million steps) fails one match over a long run of
  // whitespace: Llama 3's `\s*[\r\n]+` backtracks over the whole run before `\s+(?!\S)`
  // takes it, so a 12 MB run of spaces was "match limit exceeded". The steps one match
  // takes grow with the text it can span: the limit does too (a bound on runaway
  // patterns still, never a refusal of ordinary text).
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  if (!context)
    throw std::bad_alloc();
  pcre2_set_match_limit(context.get(), static_cast<std::uint32_t>(std::min<std::size_t>(
                                           UINT32_MAX, 10'000'000 + 16 * text.size())));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), at, 0, data.get(),
                               context.get());
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0)
      throw std::runtime_error("regular expression match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      out.push_back({begin, end});
      at = end;
    } else {
      // An empty match: step over one character (or one invalid byte) and go on.
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
        ++at;
    }
  }
  return out;
}

std::vector<std::string_view> isolate(std::string_view text,
                                      const std::vector<pcre2_pattern::match>& matches) {
  std::vector<std::string_view> pieces;
  pieces.reserve(matches.size() + 1);
  std::size_t at = 0;
  for (const auto& m : matches) {
    if (m.begin > at)
      pieces.push_back(text.substr(at, m.begin - at));
    pieces.push_back(text.substr(m.begin, m.end - m.begin));
    at = m.end;
  }
  if (at < text.size())
    pieces.push_back(text.substr(at));
  return pieces;
}

} // namespace canopy::backends
