#pragma once
// Fingerprints of what fixes a model's answers, so that a front can tell whether a
// remote worker computes the same function as the others before it routes queries
// there. A checkpoint's fingerprint hashes its config and every tensor (name, dtype,
// shape and bytes, in name order) with XXH3-128 (Debian's libxxhash: a pass over the
// weights at memory speed, where a cryptographic hash would take seconds on a large
// checkpoint). The same files give the same fingerprint on every machine. The
// llama2.c and HF forms of one model differ (their bytes do): admission is stricter,
// never looser. The mock's fingerprint hashes the options its rows depend on.
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <string>

namespace canopy::backends {

/// 32 lowercase hex digits.
std::string checkpoint_fingerprint(const checkpoint& ckpt);
/// 32 lowercase hex digits of (vocab_size, context_length, seed): what the mock's rows
/// depend on (its simulated costs and KV bytes do not change an answer).
std::string mock_fingerprint(const mock_options& options);

} // namespace canopy::backends
