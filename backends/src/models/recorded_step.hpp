#pragma once
// A step of device work recorded once and replayed: a CUDA graph. Replaying launches
// every kernel of the step at once, with no allocation and no host work in between:
// an eager decode pass on a GPU is bound by launching its ~1,000 kernels one by one
// (docs/benchmarks.md, "Issue 32's workloads": 13 ms eager against 2-3 ms replayed).
// The step must read its inputs from, and leave its output in, tensors whose storage
// stays put from one replay to the next: a replay rewrites the same addresses.
// Thread contract: one thread at a time (the worker's); not copyable.

#include <ATen/ATen.h>

#include <functional>
#include <memory>

namespace canopy::backends {

class recorded_step {
public:
  virtual ~recorded_step() = default;
  /// Runs the recorded work again on the device's current stream, rewriting output().
  virtual void replay() = 0;
  /// What the step returned when recorded; each replay rewrites it in place.
  const at::Tensor& output() const { return output_; }

protected:
  at::Tensor output_;
};

/// Whether this build can record steps (built against a CUDA LibTorch whose graph API
/// compiled here).
bool can_record_steps();

/// Runs `step` once on `device` to warm it up (libraries' handles, the allocator's
/// blocks), then records a second run as a CUDA graph. `share_memory_with`, when not
/// null, lends the graph its memory pool (Note [one memory pool] in decode_graphs.cpp).
/// Throws std::logic_error where can_record_steps() is false, and what CUDA throws when
/// the step does something a graph cannot hold (a host synchronization).
std::unique_ptr<recorded_step> record_step(const std::function<at::Tensor()>& step,
                                           at::Device device,
                                           const recorded_step* share_memory_with);

} // namespace canopy::backends
