#include "models/rows_to_host.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <thread>

namespace canopy::backends {

rows_to_host::rows_to_host(const at::Tensor& rows) {
  if (!rows.is_cuda()) {
    host_ = rows.contiguous();
    return;
  }
  host_ = at::empty(rows.sizes(), rows.options().device(at::kCPU).pinned_memory(true));
  host_.copy_(rows, /*non_blocking=*/true);
  const auto stream =
      c10::impl::VirtualGuardImpl(rows.device().type()).getStream(rows.device());
  copied_.emplace(rows.device().type());
  copied_->record(stream);
}

bool rows_to_host::arrived() const {
  return !copied_ || copied_->query();
}

const float* rows_to_host::wait() {
  // A spin, as CUDA's own default wait is with a core to spare; LibTorch 1.13's
  // c10::Event has no blocking wait.
  while (!arrived())
    std::this_thread::yield();
  return host_.data_ptr<float>();
}

} // namespace canopy::backends
