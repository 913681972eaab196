// Fuzz target for the safetensors header parser (parse_safetensors_header), the code
// that reads the least trusted bytes of a checkpoint. Built two ways:
//  * with libFuzzer + ASan when CANOPY_BUILD_FUZZERS=ON (tests/fuzz/CMakeLists.txt):
//      build/tests/fuzz/safetensors_header_fuzz -max_total_time=60 corpus/
//  * into the always-built ctest safetensors_fuzz_corpus_test, which feeds this same
//    entry a deterministic set of mutated valid files.
// Contract checked here: any input either parses into a header whose every tensor lies
// inside the file with exactly the bytes its shape needs and overlaps no other, or
// throws checkpoint_error. Anything else (another exception, a crash, a broken
// invariant, an out-of-bounds read under ASan) is a finding.
// Thread contract: pure function of its input.

#include <canopy/backends/checkpoints/safetensors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace {

/// Aborts (a finding) when an accepted header breaks what loaders rely on.
void check_invariants(const canopy::backends::safetensors_header& header,
                      std::string_view bytes) {
  using namespace canopy::backends;
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length =
        (length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (header.data_offset != 8 + length || header.data_offset > bytes.size())
    __builtin_trap();
  const std::uint64_t data_size = bytes.size() - header.data_offset;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : header.tensors) {
    if (name.empty() || entry.begin > entry.end || entry.end > data_size)
      __builtin_trap();
    std::uint64_t count = element_size(entry.dtype);
    for (std::int64_t dim : entry.shape) {
      if (dim < 0 ||
          __builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count))
        __builtin_trap();
    }
    if (count != entry.end - entry.begin)
      __builtin_trap();
    if (entry.end > entry.begin)
      ranges.emplace_back(entry.begin, entry.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      __builtin_trap();
  // Touch the first and last byte of every view: ASan reports a view outside the input.
  volatile unsigned char sink = 0;
  for (const auto& [name, view] : safetensors_views(header, bytes)) {
    const std::size_t n = byte_size(view);
    if (n > 0)
      sink = static_cast<unsigned char>(sink ^ static_cast<unsigned char>(view.data[0]) ^
                                        static_cast<unsigned char>(view.data[n - 1]));
  }
  (void)sink;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    check_invariants(
        canopy::backends::parse_safetensors_header(bytes, "fuzz.safetensors"), bytes);
  } catch (const canopy::backends::checkpoint_error&) {
    // The documented way to refuse a file. Any other exception escapes: a finding.
  }
  return 0;
}
