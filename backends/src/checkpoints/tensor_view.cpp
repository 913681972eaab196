#include <canopy/backends/checkpoints/checkpoint.hpp>

namespace canopy::backends {

const char* to_string(weight_dtype dtype) {
  return name_of(weight_dtype_names, dtype, "?").data(); // the names are literals
}

std::int64_t numel(const tensor_view& view) {
  std::int64_t n = 1;
  for (std::int64_t dim : view.shape)
    n *= dim; // views come from validated files or owned buffers: no overflow
  return n;
}

std::size_t byte_size(const tensor_view& view) {
  const auto n = static_cast<std::size_t>(numel(view));
  return is_block_dtype(view.dtype) ? n / record_values * record_bytes(view.dtype)
                                    : n * element_size(view.dtype);
}

} // namespace canopy::backends
