#include "bench/device_ceilings.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <functional>

namespace canopy::app {

namespace {

/// Runs of `launch` per second over about `seconds`, after one warm-up run (BLAS threads
/// start, pages are touched, kernels load). A GPU runs them asynchronously: reading one
/// value of `result` to the host waits for the device's last run.
double runs_per_second(const std::function<void()>& launch, const at::Tensor& result,
                       double seconds) {
  const auto wait = [&] { (void)result.view(-1)[0].item<float>(); };
  launch();
  wait();
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  std::int64_t runs = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < 8; ++i)
      launch();
    runs += 8;
    wait();
    elapsed = std::chrono::duration<double>(clock::now() - started).count();
  } while (elapsed < seconds);
  return double(runs) / elapsed;
}

at::ScalarType products_dtype(const std::string& dtype) {
  if (dtype == "bfloat16")
    return at::kBFloat16;
  if (dtype == "float16")
    return at::kHalf;
  return at::kFloat;
}

} // namespace

device_ceilings measure_device_ceilings(const std::string& device,
                                        const std::string& dtype) {
  const at::Device where(device);
  device_ceilings out;
  out.device = device;
  const bool gpu = !where.is_cpu();
  const auto type = gpu ? products_dtype(dtype) : at::kFloat;
  out.matmul_dtype = gpu ? dtype : "float32";
  out.matmul_size = gpu ? 8192 : 1024;
  const auto options = at::TensorOptions().dtype(type).device(where);
  {
    const auto n = out.matmul_size;
    const auto a = at::randn({n, n}, options);
    const auto b = at::randn({n, n}, options);
    auto c = at::empty({n, n}, options);
    const double rate = runs_per_second([&] { at::mm_out(c, a, b); }, c, 0.5);
    out.matmul_gflops = 2.0 * double(n) * double(n) * double(n) * rate * 1e-9;
  }
  if (gpu) {
    const std::int64_t bytes = std::int64_t{256} << 20;
    const auto from = at::zeros({bytes}, options.dtype(at::kByte));
    auto to = at::empty_like(from);
    const double rate = runs_per_second([&] { to.copy_(from); }, to, 0.5);
    out.copy_gbytes_per_s = double(bytes) * rate * 1e-9;
  }
  return out;
}

} // namespace canopy::app
