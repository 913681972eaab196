#pragma once
// The interface a worker drives: one forward pass over a batch of ragged items.
// Each item continues a sequence whose prefix KV the worker already holds (or starts
// from nothing), computes its new tokens, returns the KV handles of those tokens and
// the next-token log-probs at the positions asked for.
//
// Thread contract: a backend_i, and the passes it started, are used by one thread at
// a time (its worker's).
// The structs are plain values; messages/ makes them serializable, because workers
// may live on other machines.

#include <canopy/backends/checkpoints/lora_adapter_files.hpp>
#include <canopy/backends/pass_profile.hpp>
#include <canopy/cache/types.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace canopy::backends {

using cache::kv_handle;
using cache::no_kv;
using cache::token_id;

/// One sequence of a pass.
struct pass_item {
  kv_handle prefix = no_kv;        // KV of the last cached prefix token; no_kv: none
  std::uint32_t prefix_length = 0; // tokens covered by `prefix` (0 when no_kv)
  std::vector<token_id> tokens;    // [n_new] tokens to compute, n_new >= 1
  std::vector<std::uint32_t> rows; // ascending indices into `tokens` whose next-token
                                   // log-probs are wanted
  bool keep_kv = true;             // false: the reference path; KV is dropped
  std::string adapter;             // the LoRA adapter it is computed under ("": none;
                                   // backend_i::add_adapter); its prefix KV must be
                                   // the same adapter's
};

struct pass_request {
  std::vector<pass_item> items;
};

struct item_output {
  std::vector<kv_handle> kv;   // [n_new] when keep_kv, else empty; no_kv for the
                               // tail of tokens the backend had no room to keep
  std::vector<float> logprobs; // [rows.size() * vocab], row-major, natural log
};

struct pass_result {
  std::vector<item_output> items;    // [items], in request order
  std::uint64_t tokens_computed = 0; // exactly the new tokens the backend computed
  std::uint64_t matmul_flops = 0; // FLOPs of the pass's matrix products (0: not a model)
  std::uint64_t compute_ns = 0;   // time the backend spent on the pass
};

/// What the engine needs to know of a model. A remote worker announces it, and a
/// front admits the worker only when architecture, vocabulary, context, dtype and
/// fingerprint agree with what it serves.
struct model_info {
  std::string name;
  std::string architecture;             // "llama", "gpt2" or "mock"
  std::int64_t vocab_size = 0;          // rows have this many entries
  std::int64_t context_length = 0;      // longest sequence a query may have
  std::int64_t kv_window = 0;           // sliding window: positions a token attends
                                        // to, itself included; 0: every one before it
  std::string dtype;                    // compute dtype: float32 | float16 | bfloat16
  std::string kv_dtype;                 // KV storage format (kv_dtype_names()); empty:
                                        // none (the mock)
  std::string fingerprint;              // hash of what fixes the answers (the weights
                                        // and config, or the mock's options); empty:
                                        // not known (a front that loaded no weights)
  std::uint64_t kv_bytes_per_token = 0; // KV budget cost of one token on this backend
  std::uint64_t kv_keep_bytes = 0;      // KV the cache may keep on this worker (less than
                                        // its storage, so a pass has room for its new
                                        // tokens); 0: no limit of the backend's own
  std::uint64_t kv_host_keep_bytes = 0; // the host tier the cache may keep KV in on this
                                        // worker (backend_i::demote_kv); 0: none
  std::string weight_dtype;             // the matrices' format: the compute dtype, or
                                        // bfloat16 | int8 | int4; empty: none (mock)
  std::uint64_t weight_bytes = 0;       // memory the weights take; 0: none (mock)
  std::uint64_t step_weight_bytes = 0;  // of those, what one decode step reads: every
                                        // matrix, of the embedding tables only a row;
                                        // 0: none (mock)
  std::string weight_kernels;           // what the products run on (this worker's CPU):
                                        // int8 | int4: avx512_vnni+avx2 | avx512_vnni
                                        // | avx2 | portable;
                                        // bfloat16: avx2 | portable; empty otherwise
};

/// `info.name` as clients may see it: the architecture and the file or folder name the
/// model was read from, without the folders above it ("llama stories260K.bin"); where
/// a model lives on the server is not theirs to know.
std::string public_name(const model_info& info);

/// A pass whose device work is queued (backend_i::start): its rows are on their way to
/// the host. Finish every one: a pass dropped unfinished answers no one, and the KV it
/// made may stay held until the backend goes.
class started_pass {
public:
  virtual ~started_pass() = default;
  /// True when finish() would not wait for the device. Never waits itself.
  virtual bool ready() const = 0;
  /// Waits for the rows and answers the pass, once. Throws as backend_i::run does.
  virtual pass_result finish() = 0;
};

/// A pass answered before start() returned: what a backend that computes on its caller's
/// thread (the CPU, the mock) starts.
class finished_pass final : public started_pass {
public:
  explicit finished_pass(pass_result result) : result_(std::move(result)) {}
  bool ready() const override { return true; }
  pass_result finish() override { return std::move(result_); }

private:
  pass_result result_;
};

class backend_i {
public:
  virtual ~backend_i() = default;
  virtual const model_info& info() const = 0;
  /// Runs one pass. Throws (any exception) on failure; the worker turns it into an
  /// error for every waiting caller. Items referring to unknown KV handles, or whose
  /// prefix_length disagrees with the handle, are a failure of the whole pass.
  virtual pass_result run(const pass_request& request) = 0;
  /// Starts a pass and returns once the device has its work queued, so that the caller
  /// can start the next pass (its launch overlapping this one's compute) before it
  /// finishes this one (its rows coming to the host while the next computes). Between
  /// start and finish the backend may start other passes and free or demote KV; finish
  /// passes in the order they started. Throws what run() throws for a pass it refuses.
  /// The default runs the pass at once.
  virtual std::unique_ptr<started_pass> start(const pass_request& request) {
    return std::make_unique<finished_pass>(run(request));
  }
  /// Frees KV entries the cache no longer holds. Unknown handles are ignored.
  virtual void release_kv(const std::vector<kv_handle>& handles) = 0;
  /// Moves KV entries from the device tier to the host tier, where they keep their
  /// handles; a pass that reads one moves it back first. Returns how many moved: the
  /// others (unknown, already on the host, or no host room) stay where they were. A
  /// backend without a host tier moves none.
  virtual std::size_t demote_kv(const std::vector<kv_handle>& handles) {
    (void)handles;
    return 0;
  }
  /// KV entries currently held (for tests and stats).
  virtual std::size_t kv_entries() const = 0;
  /// Charges the parts of every pass from now on to `profile` (null: stops). A
  /// backend without parts worth naming (the mock) ignores it.
  virtual void attach_profile(pass_profile* profile) { (void)profile; }
  /// Loads the PEFT LoRA adapter in `files` (read_lora_adapter_files) as `name`, for
  /// pass items naming it. Throws (checkpoint_error or std::invalid_argument, naming
  /// the problem) when the adapter cannot serve this model or does not fit the
  /// adapters' budget, when `name` is empty or already loaded, or when the backend has
  /// no adapters (the default: a host's own backend_i may have none). The mock takes any
  /// files: its rows under an adapter are those of mock_adapted(options, files).
  virtual void add_adapter(const std::string& name, const lora_adapter_files& files);
  /// Unloads adapter `name`; false when none was loaded under it. KV computed under it
  /// is the caller's to release.
  virtual bool remove_adapter(const std::string& name) {
    (void)name;
    return false;
  }
};

} // namespace canopy::backends
