#pragma once
// What a transformer checkpoint is, independent of the file it came from: the
// architecture, its shapes and constants. Loaders fill it from config.json or a
// llama2.c header; the LibTorch models read it; make-model writes it.
// Thread contract: a plain value.

#include <cstdint>
#include <string>

namespace canopy::backends {

enum class architecture { llama, gpt2 };

/// How q/k rows are ordered inside each head for rotary embeddings.
/// HF checkpoints use rotate_half (pairs (j, j+hd/2)); llama2.c files use interleaved
/// pairs (2j, 2j+1). The models convert interleaved rows to rotate_half at load time,
/// so both give the same answers.
enum class rope_pairs { rotate_half, interleaved };

struct model_config {
  architecture arch = architecture::llama;
  std::int64_t hidden_size = 0;       // D
  std::int64_t intermediate_size = 0; // F (MLP inner width)
  std::int64_t num_layers = 0;        // L
  std::int64_t num_heads = 0;         // H (query heads)
  std::int64_t num_kv_heads = 0;      // KV heads (llama GQA; == H for gpt2)
  std::int64_t head_dim = 0;          // hd (D / H unless the config says otherwise)
  std::int64_t vocab_size = 0;        // V: rows of the embedding and the output head
  std::int64_t context_length = 0;    // longest sequence (max_position_embeddings / n_positions / seq_len)
  double norm_eps = 1e-5;             // RMSNorm (llama) or LayerNorm (gpt2) epsilon
  double rope_theta = 10000.0;        // llama only
  rope_pairs rope = rope_pairs::rotate_half; // llama only
  bool tied_embeddings = true;        // output head shares the token embedding
  std::int64_t bos_token_id = -1;     // -1: none known
  std::int64_t eos_token_id = -1;     // -1: none known
};

inline std::string to_string(architecture arch) {
  return arch == architecture::llama ? "llama" : "gpt2";
}

} // namespace canopy::backends
