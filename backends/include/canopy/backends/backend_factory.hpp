#pragma once
// Builds the backend of one worker from a plain description, so that a description
// (not a backend object) is what a worker process starts from: it loads the model from
// its own disk. messages/ makes the description serializable.
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include <memory>
#include <string>

namespace canopy::backends {

struct backend_spec {
  std::string kind = "mock";  // "mock" | "torch"
  std::string device = "cpu"; // "cpu", "cuda" or "cuda:N"
  std::string model;          // torch: HF directory, GGUF or .bin; empty: builtin_model()
  mock_options mock;          // kind "mock"
  torch_options torch;        // kind "torch"
};

/// The model of the torch backend when none is named: a seeded synthetic Llama small
/// enough to answer at once on a laptop CPU (hidden 256, 4 layers, 8 heads over 4 KV
/// heads, vocab 4096, context 2048; ~4M parameters).
synthetic_spec builtin_model();

/// Throws std::invalid_argument naming the problem for an unknown kind or device, and
/// checkpoint_error for a model file that cannot be used.
std::unique_ptr<backend_i> make_backend(const backend_spec& spec);

/// What make_backend(spec) would serve, without loading weights or making a backend:
/// name, architecture, vocabulary, context and dtype (a front that runs no worker of
/// its own validates queries with it). The fingerprint is known for the mock only, and
/// the KV fields are 0. Throws as make_backend for what it reads.
model_info describe_model(const backend_spec& spec);

} // namespace canopy::backends
