#pragma once
// One stored next-token log-probability distribution, immutable once made.
// Thread contract: immutable after construction; share freely across threads
// through std::shared_ptr<const logprob_row>.

#include <canopy/cache/enum_names.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace canopy::cache {

/// Storage element type of a row. float32 is exact; float16 and bfloat16 halve the
/// memory at the accuracy cost stated in docs/cache.md (round-to-nearest-even).
enum class row_dtype : std::uint8_t { float32 = 0, float16 = 1, bfloat16 = 2 };

inline constexpr std::array<enum_name<row_dtype>, 3> row_dtype_names{{
    {row_dtype::float32, "float32"},
    {row_dtype::float16, "float16"},
    {row_dtype::bfloat16, "bfloat16"},
}};

/// "float32" | "float16" | "bfloat16"; nullopt for anything else.
std::optional<row_dtype> parse_row_dtype(std::string_view name);
std::string_view to_string(row_dtype dtype);
std::size_t element_bytes(row_dtype dtype);

class logprob_row;
using row_ptr = std::shared_ptr<const logprob_row>;

class logprob_row {
public:
  /// Encodes `vocab` float32 values into the given storage type.
  static row_ptr encode(const float* values, std::size_t vocab, row_dtype dtype);
  /// Adopts already encoded bytes (e.g. received from another process).
  /// Throws std::invalid_argument when bytes.size() != vocab * element_bytes(dtype).
  static row_ptr adopt(row_dtype dtype, std::size_t vocab,
                       std::vector<std::uint8_t> bytes);

  row_dtype dtype() const { return dtype_; }
  std::size_t vocab() const { return vocab_; }
  /// Bytes of stored payload; what the log-prob budget accounts.
  std::size_t bytes() const { return storage_.size(); }
  const std::uint8_t* raw() const { return storage_.data(); }

  /// The values themselves when stored as float32 (zero-copy sharing), else nullptr.
  const float* float32_data() const;
  /// Decodes every value into out[0..vocab).
  void decode(float* out) const;
  /// Decodes one value.
  float at(std::size_t index) const;

private:
  logprob_row(row_dtype dtype, std::size_t vocab, std::vector<std::uint8_t> storage);
  row_dtype dtype_;
  std::size_t vocab_;
  std::vector<std::uint8_t>
      storage_; // [vocab * element_bytes(dtype)], little-endian host order
};

/// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN preserved.
std::uint16_t float_to_half(float value);
float half_to_float(std::uint16_t bits);
std::uint16_t float_to_bfloat16(float value);
float bfloat16_to_float(std::uint16_t bits);

} // namespace canopy::cache
