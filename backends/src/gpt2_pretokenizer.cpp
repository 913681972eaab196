// GPT-2's pre-tokenizer regex over PCRE2 (see gpt2_pretokenizer.hpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "gpt2_pretokenizer.hpp"

#include <pcre2.h>

#include <stdexcept>
#include <string>

namespace canopy::backends {

namespace {

constexpr std::string_view pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? "PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

} // namespace

struct gpt2_pretokenizer::compiled {
  pcre2_code* code = nullptr;
  ~compiled() { pcre2_code_free(code); }
};

gpt2_pretokenizer::gpt2_pretokenizer() : compiled_(std::make_unique<compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \p{L}, \p{N} are Unicode-aware (Python's `regex`, which encoder.py uses).
  // MATCH_INVALID_UTF: invalid UTF-8 in the subject is skipped instead of failing the match.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                                  &offset, nullptr);
  if (compiled_->code == nullptr)
    throw std::runtime_error("GPT-2 pre-tokenizer pattern rejected by PCRE2: " +
                             pcre2_message(error));
  // JIT is a speed-up only; without it (unsupported platform) the interpreter gives the
  // same matches, so the result is deliberately ignored.
  (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

gpt2_pretokenizer::~gpt2_pretokenizer() = default;

std::vector<std::string_view> gpt2_pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty())
    return words;
  // Match data is per call: that is what makes split() safe from many threads.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  if (!match)
    throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), at, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      words.push_back(text.substr(at));  // only invalid UTF-8 is left
      break;
    }
    if (rc < 0)
      throw std::runtime_error("GPT-2 pre-tokenizer: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const std::size_t begin = ovector[0];
    std::size_t end = ovector[1];
    if (begin > at)
      words.push_back(text.substr(at, begin - at));  // invalid UTF-8 before the match
    if (end == begin)  // every alternative consumes input; guard against looping anyway
      end = begin + 1;
    words.push_back(text.substr(begin, end - begin));
    at = end;
  }
  return words;
}

} // namespace canopy::backends
