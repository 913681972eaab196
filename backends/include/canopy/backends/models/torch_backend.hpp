#pragma once
// The LibTorch backend: a Llama or GPT-2 checkpoint run on one device, with its KV in
// storage preallocated from the worker's KV byte budget. One pass computes the new
// tokens of all its items together (ragged: different cached lengths and numbers of
// new tokens, no padding to the longest context).
// Thread contract: see backend_i (one thread at a time).

#include <canopy/backends/backend.hpp>
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/kv/kv_dtypes.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace canopy::backends {

/// How a worker runs its model (the device is named beside these).
struct torch_options {
  std::string dtype = "float32"; // compute dtype: float32 | float16 | bfloat16
  std::string weight_dtype; // the matrices' format: the compute dtype (dense), int8 or
                            // int4 (blocks of 32, as llama.cpp's Q8_0 and Q4_0; the
                            // Llama family, float32 on the CPU); empty: the file's
                            // own blocks (a quantized GGUF) where they run, else dense
  std::string kv_dtype;     // KV storage: kv_dtype_names(); empty: the compute dtype
  std::uint64_t kv_residual_tokens =
      0; // the newest N stored tokens also keep their KV in
         // the compute dtype, read instead (kv_residual.hpp);
         // their copies come out of kv_budget_bytes
  std::uint64_t kv_host_budget_bytes = 0; // the host tier: KV demoted from the device
                                          // (backend_i::demote_kv) lives here; 0: none
  std::string kv_host_dtype; // the host tier's format; empty: the device's (moves
                             // are lossless); "int8" compresses (lossy)
  std::uint64_t kv_budget_bytes = std::uint64_t{1} << 30; // this worker's KV storage
  int threads = 0; // intra-op threads of this worker's passes; 0: ATen's
  std::uint64_t max_context_length = 0; // 0: the model's; else see served_config
  std::uint64_t adapter_budget_bytes = std::uint64_t{1}
                                       << 30; // what loaded LoRA adapters may take on
                                              // the device, all together
  bool direct_forward = true; // float32 Llama on the CPU: plain loops and CBLAS on
                              // kept buffers (direct_llama_forward.hpp); false:
                              // ATen's ops, as every other model, dtype and device
  std::string decode_graphs =
      "auto"; // decode passes (one new token and row per item) in fixed-shape
              // buckets: "auto" records them as CUDA graphs on a CUDA device
              // (decode_graphs.hpp) and runs them ragged elsewhere; "off": ragged
              // everywhere; "eager": buckets run op by op on any device (the tests'
              // check of the recorded steps' numbers). Not with kv_residual_tokens.
};

/// Why `value` is no torch_options::decode_graphs setting (auto, off or eager), naming
/// the known ones; "" when it is one.
std::string decode_graphs_problem(const std::string& value);

/// `config` with the context `options` ask for: 0 keeps the model's; less than the
/// model's lowers it; more is allowed only for a sliding-window model (its attention
/// reaches W tokens back at any position; RoPE angles are computed for every position
/// served). Throws std::invalid_argument naming both numbers otherwise.
model_config served_config(model_config config, const torch_options& options);

/// Runs `ckpt` on `device` ("cpu", "cuda" or "cuda:N"). Throws std::invalid_argument
/// naming the problem (unknown dtype, a CUDA device without CUDA, a budget too small
/// for one token) and checkpoint_error for weights the architecture cannot use. The
/// model_info's fingerprint is the checkpoint's (model_fingerprint.hpp).
std::unique_ptr<backend_i> make_torch_backend(const checkpoint& ckpt,
                                              const std::string& device,
                                              const torch_options& options);

/// The KV format `options` store in: kv_dtype, or the compute dtype when it is empty.
inline std::string served_kv_dtype(const torch_options& options) {
  return options.kv_dtype.empty() ? options.dtype : options.kv_dtype;
}

/// What storing KV in `options`' format costs in precision beyond the compute dtype:
/// the format's unit roundoff (kv_format.hpp) when it keeps fewer bits than the
/// compute dtype, else 0. Throws std::invalid_argument for an unknown format.
double kv_storage_roundoff(const torch_options& options);

/// The unit roundoff of `options`' compute dtype (float32 2^-24, bfloat16 2^-8, float16
/// 2^-11): how far each rounded activation may move. Throws for an unknown dtype.
double compute_roundoff(const torch_options& options);

/// What weights in blocks (weight_dtype int8 or int4) cost two runs of one sequence in
/// agreement: the activations entering each product are rounded to int8 steps of
/// 1/254 of their block's largest value, so float rounding that differs between two
/// paths may move a value across a step. 1/254 for a model `served` in int8 or int4
/// (its model_info), 0 for dense weights.
double block_roundoff(const model_info& served);

/// What the products of weights in `options.weight_dtype` run on here: the kernels'
/// instruction set (int8, int4: avx512_vnni, avx2 or portable; bfloat16: avx2 or
/// portable, BLAS either way for batches), or "" (dense weights).
std::string weight_kernels_here(const torch_options& options);

/// What float32 products run on in this process's CPU forwards, for reports beside the
/// CPU's name: "products avx512, OpenBLAS Haswell" (the direct forward's products:
/// Canopy's AVX-512 kernels, or "blas"; then BLAS's kernel set, which takes ATen's
/// products and, without those kernels, the direct forward's).
std::string cpu_kernels_here();

/// CUDA devices LibTorch can use in this process (0 in a CPU-only build).
int cuda_device_count();

} // namespace canopy::backends
