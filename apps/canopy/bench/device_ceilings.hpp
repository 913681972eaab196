#pragma once
// What the bench's device allows, measured in the same process as a bench run (the
// machines are noisy): the matrix-product rate a model's passes are compared to (they
// are mostly matrix products, so a pass cannot beat it by much) and, on a GPU, the
// device-to-device copy rate that bounds a decode step (it reads every weight once).
// Thread contract: call from one thread; it uses LibTorch's (and the BLAS's) threads
// as configured for the process, and on a GPU the device's current stream.

#include <cstdint>
#include <string>

namespace canopy::app {

struct device_ceilings {
  std::string device;       // where they were measured: "cpu", "cuda:0", ...
  std::string matmul_dtype; // of the products: float32 on the CPU, else the compute dtype
  std::int64_t matmul_size = 0; // the products are [n, n] x [n, n]
  double matmul_gflops = 0;
  double copy_gbytes_per_s = 0; // device to device, each byte read once and written
                                // once; 0: not measured (the CPU)
};

/// On the CPU: float32 1024x1024 products for about half a second (the ceiling the CPU
/// targets were set against), no copy rate. On a GPU: `dtype` 8192x8192 products, and
/// copies of 256 MiB (far past the L2 cache), each for about half a second, timed from
/// the first launch to the device's last result; 0.9 GiB of device memory meanwhile in
/// bfloat16 (1.3 in float32), kept by LibTorch's caching allocator for the engine's use.
device_ceilings measure_device_ceilings(const std::string& device,
                                        const std::string& dtype);

} // namespace canopy::app
