#include "kv/index_tensor.hpp"

#include <algorithm>

namespace canopy::backends {

at::Tensor index_tensor(const std::vector<std::int64_t>& values, at::Device device) {
  auto t = at::empty({static_cast<std::int64_t>(values.size())}, at::kLong);
  std::copy(values.begin(), values.end(), t.data_ptr<std::int64_t>());
  return t.to(device);
}

} // namespace canopy::backends
