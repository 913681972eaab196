#include "kv/kv_format.hpp"

#include <canopy/backends/kv/kv_dtypes.hpp>

#include <stdexcept>

namespace canopy::backends {

const std::vector<std::string>& kv_dtype_names() {
  static const std::vector<std::string> names = {"float32", "float16", "bfloat16",
                                                 "int8"};
  return names;
}

std::unique_ptr<kv_format> make_kv_format(const std::string& name,
                                          at::ScalarType compute) {
  if (name.empty())
    return make_cast_kv_format(compute);
  if (name == "float32")
    return make_cast_kv_format(at::kFloat);
  if (name == "float16")
    return make_cast_kv_format(at::kHalf);
  if (name == "bfloat16")
    return make_cast_kv_format(at::kBFloat16);
  if (name == "int8")
    return make_int8_kv_format();
  std::string known;
  for (const auto& n : kv_dtype_names())
    known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown kv_dtype '" + name + "' (known: " + known +
                              "; empty: the compute dtype)");
}

} // namespace canopy::backends
