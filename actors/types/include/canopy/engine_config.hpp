#pragma once
// Every setting of an engine, with its default. from_json() and the command line use
// the same keys (docs/configuration.md: "Configuration").
// Thread contract: plain value.

#include <canopy/backends/backend.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace canopy {

struct engine_config {
  // -- model ------------------------------------------------------------------------
  std::string backend = "torch"; // "torch" (a LibTorch Llama or GPT-2) | "mock"
  std::string model;             // torch: HF directory, GGUF or llama2.c .bin; empty:
                                 // the built-in seeded synthetic Llama
  std::string tokenizer;         // tokenizer file; torch, empty: found beside model;
                                 // mock: rows of its size (vocab_size unused)
  std::string dtype = "float32"; // torch: compute dtype float32 | float16 | bfloat16
  std::string weight_dtype;      // torch: the matrices' format: bfloat16 | int8 | int4
                                 // (int8, int4: blocks of 32, as llama.cpp's Q8_0 and
                                 // Q4_0; Llama family, float32 on the CPU); empty: the
                                 // compute dtype
  std::string kv_dtype;          // torch: KV storage float32 | float16 | bfloat16 |
                                 // int8 (lossy); empty: the compute dtype
  std::uint64_t kv_residual_tokens = 0; // torch: the newest N stored tokens also keep
                                        // compute-dtype KV, read instead of the format's
  std::uint64_t kv_host_budget_bytes = 0; // torch: per worker, a host tier KV evicted
                                          // from the device moves to (0: none)
  std::string kv_host_dtype;              // torch: the host tier's format; empty: the
                                          // device's (lossless); "int8" (lossy)
  std::uint64_t max_context_length = 0; // torch: 0: the model's context; N: sequences up
                                        // to N tokens (past the model's only with a
                                        // sliding window, whose reach stays W)
  std::uint32_t threads_per_worker = 0; // torch: ATen intra-op threads per worker; 0: 1
                                        // (matmuls use every core through OpenBLAS's
                                        // pool; see Note [intra-op threads])
  bool direct_forward = true;           // torch: float32 Llama on the CPU runs without
                                        // ATen's per-op dispatch (direct_llama_forward);
                                        // false: ATen's ops, for comparison
  std::string decode_graphs = "auto";   // torch: decode passes as CUDA graphs per
                                        // bucket on a CUDA device; off; eager (any
                                        // device, the buckets unrecorded)
  std::int64_t vocab_size = 512;        // mock: entries per row
  std::int64_t context_length = 4096;   // mock: longest accepted sequence
  double mock_cost_per_pass_us = 0;     // mock: simulated time per pass
  double mock_cost_per_token_us = 0;    // mock: simulated time per new token
  std::uint64_t mock_kv_bytes_per_token = 4096; // mock: KV budget cost of a token
  std::int64_t mock_kv_window = 0; // mock: read KV as a sliding window of this many
                                   // positions (0: full attention)
  std::uint64_t mock_seed = 0x243F6A8885A308D3ULL;

  // -- devices ----------------------------------------------------------------------
  std::uint32_t workers = 1;        // one worker actor per device; 0 (with no
                                    // devices): a front only, with remote workers
  std::vector<std::string> devices; // empty: every CUDA device for torch (without a
                                    // backend_factory) when there is one, else
                                    // `workers` times "cpu"
  std::uint32_t worker_passes_in_flight = 1; // passes one worker runs or holds at once

  // -- remote workers (docs/across-machines.md: "Across machines")
  // -------------------------------------
  std::vector<std::string> remote_workers; // "host:port" of `canopy worker` processes
  double worker_timeout_ms = 2000;         // a silent worker node is lost after this long
  std::string cluster_token_file;          // shared secret: nodes prove it to each other
  std::string tls_cert, tls_key, tls_ca;   // all three: CAF's TLS between nodes (PEM)

  // -- batching -----------------------------------------------------------------------
  std::uint32_t batch_size = 0;       // flush when this many distinct queries wait;
                                      // 0: batch_size_in_effect()
  double batch_timeout_ms = 2.0;      // flush this long after the FIRST waiting query
  bool flush_when_idle = true;        // flush at once when a worker is idle
  bool merge_duplicates = true;       // equal sequences share one computation
  bool rows_at_every_position = true; // store the row after every computed token

  // -- cache --------------------------------------------------------------------------
  bool cache_enabled = true; // false: no lookups, no stored rows, no KV reuse
  bool kv_reuse = true;      // false: every pass recomputes its whole sequence
                             // (rows are still cached), as genlm-backend's HF
                             // path between cache_kv calls
  std::uint64_t logprob_budget_bytes = std::uint64_t{1} << 30;
  std::uint64_t logprob_max_entries = 0; // 0: none (genlm-backend OutputCache maxsize)
  std::uint64_t kv_budget_bytes = std::uint64_t{1} << 30; // per worker
  std::uint64_t adapter_budget_bytes = std::uint64_t{1}
                                       << 30; // LoRA adapters: their files kept by the
                                              // batcher, and their factors on each
                                              // worker's device, all together
  std::vector<std::string> adapters;   // loaded at start: "name=PATH" (a PEFT directory)
  std::string eviction_policy = "lru"; // lru | lfu | fifo | priority
  std::string logprob_dtype = "float32"; // float32 | float16 | bfloat16

  // -- runtime ------------------------------------------------------------------------
  std::uint32_t request_actors = 0;    // front actors callers are spread over; 0: half
                                       // the cores, at least 1
  std::uint32_t scheduler_threads = 0; // CAF workers of an owned system; 0: cores
  double scheduler_poll_sleep_us = 0;  // CAF workers briefly idle sleep this long
                                       // between looks for work; 0: they look ~600
                                       // times at once, then wait to be woken by the
                                       // next message (Note [poll sleep])
  double query_timeout_ms = 0;         // 0: none; else deadline_exceeded after it
  double pass_timeout_ms = 600000;     // a pass running longer fails its batch

  /// Not a key: a host-supplied backend per worker (index, device) instead of
  /// `backend`. The engine then asks backend 0 for vocab and context.
  std::function<std::unique_ptr<backends::backend_i>(std::uint32_t, const std::string&)>
      backend_factory;

  /// Parses a JSON object of settings; unknown keys, wrong types and invalid values
  /// throw canopy::error(errc::invalid_config) naming the key.
  static engine_config from_json(std::string_view json);
  /// Applies one setting given as text (the command line's --key value).
  void set(std::string_view key, std::string_view value);
  /// Throws canopy::error(errc::invalid_config) naming the first invalid setting.
  void validate() const;
  /// Every key with its current value, as a JSON object.
  std::string to_json() const;
  /// Every key with a one-line description (for --help).
  static std::vector<std::pair<std::string, std::string>> describe();

  /// `devices`; when empty, every visible CUDA device (the torch backend, no
  /// backend_factory), else `workers` times "cpu": a host's own factory gets the
  /// workers it asked for whatever GPUs the machine has.
  std::vector<std::string> device_list() const;
  /// `batch_size`; when 0, 256 if the engine's own devices are CUDA devices, else 64. A
  /// GPU decode step of 256 items costs little more than one of 64 (a CUDA graph's:
  /// 3.4 ms against 2.4 on an H200, docs/benchmarks.md), so SMC's particles go in one
  /// pass a step; a CPU pass costs in proportion to its items. A front whose workers
  /// are all remote has no devices of its own: 64.
  std::uint32_t batch_size_in_effect() const;
  /// `adapters` as (name, directory) pairs, in order.
  std::vector<std::pair<std::string, std::string>> adapter_list() const;
  /// True when TLS files are given (all three, as validate() requires).
  bool tls() const { return !tls_cert.empty(); }
};

} // namespace canopy
