#include <canopy/backends/checkpoints/llama2c_checkpoint.hpp>

#include <canopy/backends/checkpoints/checkpoint_schema.hpp>
#include <canopy/backends/checkpoints/mapped_file.hpp>

#include "checkpoints/checked_math.hpp"

#include <array>
#include <cstring>
#include <optional>

namespace canopy::backends {

namespace {

constexpr std::size_t header_bytes = 7 * 4;
// llama2.c's later exports (version 1, 2) start with this magic instead of dim.
constexpr std::uint32_t llama2c_magic = 0x616b3432; // "ak42"

std::int32_t read_i32_le(const std::byte* p) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | static_cast<std::uint32_t>(p[i]);
  std::int32_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

struct header {
  std::int64_t dim, hidden_dim, layers, heads, kv_heads, vocab, seq_len;
  bool untied;
};

header read_header(const mapped_file& file, const std::string& name) {
  if (file.size() < header_bytes)
    throw checkpoint_error(name + ": file is " + std::to_string(file.size()) +
                           " bytes, shorter than the 28-byte llama2.c header");
  std::array<std::int64_t, 7> v{};
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = read_i32_le(file.data() + 4 * i);
  if (static_cast<std::uint32_t>(v[0]) == llama2c_magic)
    throw checkpoint_error(name + ": a llama2.c version " + std::to_string(v[1]) +
                           " export; only the legacy version-0 format is supported");
  if (std::memcmp(file.data(), "PK\x03\x04", 4) == 0)
    throw checkpoint_error(name +
                           ": a zip archive (PyTorch pickle?), not a llama2.c file");
  header h{v[0], v[1], v[2], v[3], v[4], v[5] < 0 ? -v[5] : v[5], v[6], v[5] < 0};
  static const char* const names[] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                      "n_kv_heads", "vocab_size", "seq_len"};
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] == 0 || (v[i] < 0 && i != 5))
      throw checkpoint_error(name + ": header " + names[i] + " = " +
                             std::to_string(v[i]) + " must be positive");
  if (h.dim % h.heads != 0)
    throw checkpoint_error(name + ": header dim " + std::to_string(h.dim) +
                           " is not divisible by n_heads " + std::to_string(h.heads));
  if (h.kv_heads > h.heads || h.heads % h.kv_heads != 0)
    throw checkpoint_error(name + ": header n_heads " + std::to_string(h.heads) +
                           " is not a multiple of n_kv_heads " +
                           std::to_string(h.kv_heads));
  if ((h.dim / h.heads) % 2 != 0)
    throw checkpoint_error(
        name + ": header head size dim / n_heads = " + std::to_string(h.dim / h.heads) +
        " is odd (RoPE rotates pairs)");
  return h;
}

model_config config_of(const header& h) {
  model_config c;
  c.arch = architecture::llama;
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_layers = h.layers;
  c.num_heads = h.heads;
  c.num_kv_heads = h.kv_heads;
  c.head_dim = h.dim / h.heads;
  c.vocab_size = h.vocab;
  c.context_length = h.seq_len;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope = rope_pairs::interleaved;
  c.tied_embeddings = !h.untied;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

/// Walks the file in storage order, handing out float32 views.
class cursor {
public:
  cursor(const mapped_file& file) : base_(file.data()) {}

  /// The next block of `count` stacked tensors of `shape`; adds view i as names(i).
  template <class Name>
  void take(std::int64_t count, const std::vector<std::int64_t>& shape, Name&& name,
            std::map<std::string, tensor_view>& out) {
    const auto bytes = static_cast<std::size_t>(*detail::checked_product(shape, 4));
    for (std::int64_t i = 0; i < count; ++i) {
      out.emplace(name(i), tensor_view{weight_dtype::f32, shape, base_ + offset_});
      offset_ += bytes;
    }
  }
  void skip(std::size_t bytes) { offset_ += bytes; }
  std::size_t offset() const { return offset_; }

private:
  const std::byte* base_;
  std::size_t offset_ = header_bytes;
};

std::string layer(std::int64_t i, const char* rest) {
  return "model.layers." + std::to_string(i) + "." + rest;
}

} // namespace

model_config load_llama2c_config(const std::filesystem::path& path) {
  const std::string name = path.string();
  const mapped_file file(path); // mapped, not read: only the header's page comes in
  model_config config = config_of(read_header(file, name));
  validate_model_config(config, name);
  return config;
}

checkpoint load_llama2c_checkpoint(const std::filesystem::path& path) {
  const std::string name = path.string();
  auto file = std::make_shared<mapped_file>(path);
  const header h = read_header(*file, name);
  checkpoint out;
  out.source = name;
  out.config = config_of(h);
  validate_model_config(out.config, name);

  // The size check comes first and uses only checked arithmetic: a crafted header
  // (int32 values up to 2^31) cannot make the walk below leave the file.
  const std::int64_t D = h.dim, F = h.hidden_dim, L = h.layers, V = h.vocab;
  const std::int64_t hd = D / h.heads, q = h.heads * hd, kv = h.kv_heads * hd;
  std::optional<std::uint64_t> floats = std::uint64_t{0};
  auto add = [&](const std::vector<std::int64_t>& dims) {
    if (!floats)
      return;
    auto n = detail::checked_product(dims);
    floats = n ? detail::checked_add(*floats, *n) : std::nullopt;
  };
  add({V, D});                 // tok_embeddings
  add({L, D});                 // rms_att
  add({L, q, D});              // wq
  add({L, kv, D});             // wk
  add({L, kv, D});             // wv
  add({L, D, q});              // wo
  add({L, D});                 // rms_ffn
  add({L, F, D});              // w1
  add({L, D, F});              // w2
  add({L, F, D});              // w3
  add({D});                    // rms_final
  add({2, h.seq_len, hd / 2}); // freq_cis_real, freq_cis_imag
  if (h.untied)
    add({V, D}); // wcls
  auto expected = floats ? detail::checked_mul(*floats, 4) : std::nullopt;
  if (expected)
    expected = detail::checked_add(*expected, header_bytes);
  if (!expected)
    throw checkpoint_error(name + ": header sizes overflow (not a llama2.c file?)");
  if (file->size() != *expected)
    throw checkpoint_error(
        name + ": file is " + std::to_string(file->size()) +
        " bytes but the header (dim " + std::to_string(D) + ", hidden_dim " +
        std::to_string(F) + ", layers " + std::to_string(L) + ", heads " +
        std::to_string(h.heads) + ", kv_heads " + std::to_string(h.kv_heads) +
        ", vocab " + std::to_string(V) + (h.untied ? " untied" : " tied") + ", seq_len " +
        std::to_string(h.seq_len) + ") implies " + std::to_string(*expected) +
        (file->size() < *expected ? " (truncated)" : " (trailing bytes)"));

  auto& t = out.tensors;
  cursor at(*file);
  at.take(
      1, {V, D}, [](std::int64_t) { return "model.embed_tokens.weight"; }, t);
  at.take(
      L, {D}, [](std::int64_t i) { return layer(i, "input_layernorm.weight"); }, t);
  at.take(
      L, {q, D}, [](std::int64_t i) { return layer(i, "self_attn.q_proj.weight"); }, t);
  at.take(
      L, {kv, D}, [](std::int64_t i) { return layer(i, "self_attn.k_proj.weight"); }, t);
  at.take(
      L, {kv, D}, [](std::int64_t i) { return layer(i, "self_attn.v_proj.weight"); }, t);
  at.take(
      L, {D, q}, [](std::int64_t i) { return layer(i, "self_attn.o_proj.weight"); }, t);
  at.take(
      L, {D}, [](std::int64_t i) { return layer(i, "post_attention_layernorm.weight"); },
      t);
  at.take(
      L, {F, D}, [](std::int64_t i) { return layer(i, "mlp.gate_proj.weight"); }, t);
  at.take(
      L, {D, F}, [](std::int64_t i) { return layer(i, "mlp.down_proj.weight"); }, t);
  at.take(
      L, {F, D}, [](std::int64_t i) { return layer(i, "mlp.up_proj.weight"); }, t);
  at.take(
      1, {D}, [](std::int64_t) { return "model.norm.weight"; }, t);
  at.skip(static_cast<std::size_t>(2 * h.seq_len * (hd / 2) * 4)); // RoPE tables: unused
  if (h.untied)
    at.take(
        1, {V, D}, [](std::int64_t) { return "lm_head.weight"; }, t);

  check_tensor_schema(out.config, out.tensors, name);
  out.storage = std::move(file);
  return out;
}

} // namespace canopy::backends
