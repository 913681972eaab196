#pragma once
// Index tensors: positions and slots a pass computes on the host, for the device.
// Thread contract: pure functions.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace canopy::backends {

/// An int64 tensor of `values` on `device` (indices built on the host for a pass).
at::Tensor index_tensor(const std::vector<std::int64_t>& values, at::Device device);

} // namespace canopy::backends
