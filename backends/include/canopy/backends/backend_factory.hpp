#pragma once
// Builds the backend of one worker from a plain description, so that a description
// (not a backend object) is what crosses to a worker process: the worker loads the
// model from its own disk.
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/backends/synthetic_checkpoint.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace canopy::backends {

struct backend_spec {
  std::string kind = "mock";  // "mock" | "torch"
  std::string device = "cpu"; // "cpu", "cuda" or "cuda:N"
  mock_options mock;
  // torch:
  std::string model;          // HF directory or llama2.c .bin; empty: builtin_model()
  std::string dtype = "float32";
  std::uint64_t kv_budget_bytes = std::uint64_t{1} << 30;
  int threads = 0;            // intra-op threads of this worker; 0: ATen's default
};

/// The model of the torch backend when none is named: a seeded synthetic Llama small
/// enough to answer at once on a laptop CPU (hidden 256, 4 layers, 8 heads over 4 KV
/// heads, vocab 4096, context 2048; ~4M parameters).
synthetic_spec builtin_model();

/// Throws std::invalid_argument naming the problem for an unknown kind or device, and
/// checkpoint_error for a model file that cannot be used.
std::unique_ptr<backend_i> make_backend(const backend_spec& spec);

} // namespace canopy::backends
