#include "models/recorded_step.hpp"

#include <stdexcept>

// CANOPY_CUDA_GRAPHS: set by backends/CMakeLists.txt when LibTorch has CUDA and its graph
// API compiles here; otherwise recording is refused and decode passes run eagerly.
#ifdef CANOPY_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace canopy::backends {

#ifdef CANOPY_CUDA_GRAPHS

namespace {

class cuda_graph_step final : public recorded_step {
public:
  cuda_graph_step(const std::function<at::Tensor()>& step, at::Device device,
                  const cuda_graph_step* share_memory_with) {
    const c10::cuda::CUDAGuard on_device(device);
    // The inputs were copied on the current stream; recording runs on a side stream
    // (CUDA cannot record the legacy default stream), which must see them.
    c10::cuda::getCurrentCUDAStream().synchronize();
    // One side stream per thread (a worker's thread serves one device): two workers on
    // one GPU never record on the same stream, as the pool, handing its streams out in
    // turn, could give them once it wraps.
    thread_local const auto side =
        c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    const c10::cuda::CUDAStreamGuard on_side(side);
    step();
    side.synchronize();
    // Thread-local capture: another worker's thread on the same GPU may allocate or
    // launch meanwhile without invalidating this recording.
    auto pool = decltype(graph_.pool()){0, 0}; // {0, 0}: a pool of its own
    if (share_memory_with)
      pool = share_memory_with->graph_.pool();
    graph_.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      output_ = step();
    } catch (...) {
      // End the capture whatever it holds, or the pooled stream stays capturing.
      try {
        graph_.capture_end();
      } catch (...) {
      }
      throw;
    }
    graph_.capture_end();
  }

  void replay() override { graph_.replay(); }

private:
  // CUDAGraph::pool() is not const in LibTorch 2.x, though it only reads.
  mutable at::cuda::CUDAGraph graph_;
};

} // namespace

bool can_record_steps() {
  return true;
}

std::unique_ptr<recorded_step> record_step(const std::function<at::Tensor()>& step,
                                           at::Device device,
                                           const recorded_step* share_memory_with) {
  return std::make_unique<cuda_graph_step>(
      step, device, dynamic_cast<const cuda_graph_step*>(share_memory_with));
}

#else

bool can_record_steps() {
  return false;
}

std::unique_ptr<recorded_step> record_step(const std::function<at::Tensor()>&, at::Device,
                                           const recorded_step*) {
  throw std::logic_error("recording a step needs a CUDA LibTorch with CUDA graphs");
}

#endif

} // namespace canopy::backends
