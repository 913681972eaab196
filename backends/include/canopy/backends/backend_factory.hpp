#pragma once
// Builds the backend of one worker from a plain description, so that a description
// (not a backend object) is what crosses to a worker process.
// Thread contract: pure function.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <memory>
#include <string>

namespace canopy::backends {

struct backend_spec {
  std::string kind = "mock"; // "mock" (LibTorch models arrive with the models issue)
  std::string device = "cpu"; // "cpu" or "cuda:N"
  mock_options mock;
};

/// Throws std::invalid_argument naming the problem for an unknown kind or device.
std::unique_ptr<backend_i> make_backend(const backend_spec& spec);

} // namespace canopy::backends
