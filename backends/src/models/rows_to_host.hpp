#pragma once
// A pass's answer rows on their way to the host. From a CUDA device they come in one
// asynchronous copy into pinned memory (LibTorch's caching host allocator recycles it),
// queued on the pass's stream behind its kernels: a copy into pageable memory would be
// staged through a driver buffer at a fraction of the bus's speed. An event marks the
// copy's end, so that the worker waits for this pass's rows and not for a pass it
// started after it (the stream runs both).
// Thread contract: the worker's thread.

#include <ATen/ATen.h>
#include <c10/core/Event.h>

#include <optional>

namespace canopy::backends {

class rows_to_host {
public:
  /// Starts bringing `rows` ([answers, vocab] float32) to the host; rows already there
  /// are read where they are.
  explicit rows_to_host(const at::Tensor& rows);
  /// True when the rows are on the host. Never waits.
  bool arrived() const;
  /// Waits until the rows are on the host; then they are, contiguous and row-major.
  const float* wait();

private:
  at::Tensor host_;
  std::optional<c10::Event> copied_; // recorded after the copy; none: no copy
};

} // namespace canopy::backends
