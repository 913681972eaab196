#include "models/llama_model.hpp"

#include "models/torch_weights.hpp"

#include <canopy/backends/checkpoints/checkpoint_writer.hpp>

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <string>

// at::rms_norm came in LibTorch 2.4.
#define CANOPY_HAS_ATEN_RMS_NORM                                                         \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace canopy::backends {

namespace {

// Note [rotary layouts]
// HF rotates the pairs (j, j + hd/2) of each head ("rotate_half"); llama2.c and Meta
// rotate (2j, 2j + 1). Permuting the q/k rows of every head so that
// new row c*hd/2 + j = old row 2j + c turns the second into the first, so one code
// path serves both and gives the same answers (HF's convert_llama_weights_to_hf does
// the same permutation).
at::Tensor to_rotate_half(const at::Tensor& w, std::int64_t heads, std::int64_t hd) {
  return w.view({heads, hd / 2, 2, w.size(1)})
      .transpose(1, 2)
      .reshape({heads * hd, w.size(1)});
}

/// The block format every one of `parts` is stored in (a GGUF file's records); nullopt
/// when one is dense or they differ.
std::optional<block_format>
stored_blocks(const checkpoint& ckpt,
              const std::vector<std::pair<std::string, bool>>& parts) {
  std::optional<block_format> out;
  for (const auto& part : parts) {
    const auto found = ckpt.tensors.find(part.first);
    if (found == ckpt.tensors.end())
      return std::nullopt;
    const auto format = block_format_of(found->second.dtype);
    if (!format || (out && *out != *format))
      return std::nullopt;
    out = format;
  }
  return out;
}

} // namespace

// As HF's _compute_linear_scaling_rope_parameters (every frequency divided by the
// factor) and _compute_llama3_parameters (wavelengths longer than original_context /
// low_freq_factor slowed by the factor, those shorter than original_context /
// high_freq_factor kept, a smooth blend in between); per-frequency factors divide
// each frequency by its own, as ggml's rope does with freq_factors.
at::Tensor rope_inverse_frequencies(const model_config& c) {
  const auto hd = c.head_dim;
  auto exponent = at::arange(0, hd, 2, at::kDouble) / static_cast<double>(hd);
  auto inv_freq = at::pow(c.rope_theta, exponent).reciprocal();
  const auto& r = c.scaling;
  switch (r.type) {
  case rope_scaling::kind::none:
    break;
  case rope_scaling::kind::linear:
    inv_freq = inv_freq / r.factor;
    break;
  case rope_scaling::kind::llama3: {
    const auto original = static_cast<double>(r.original_context);
    const double low_freq_wavelen = original / r.low_freq_factor;
    const double high_freq_wavelen = original / r.high_freq_factor;
    const auto wavelen = 2 * M_PI / inv_freq;
    const auto scaled =
        at::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
    const auto smooth = (original / wavelen - r.low_freq_factor) /
                        (r.high_freq_factor - r.low_freq_factor);
    const auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
    const auto medium =
        (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
    inv_freq = at::where(medium, smoothed, scaled);
    break;
  }
  case rope_scaling::kind::per_frequency:
    inv_freq = inv_freq / at::tensor(r.frequency_factors, at::kDouble);
    break;
  }
  return inv_freq;
}

std::size_t llama_weights::bytes() const {
  // Tied blocks are one matrix, counted once.
  std::size_t sum =
      head.bytes() + (embed.shares(head) ? 0 : embed.bytes()) + tensor_bytes(norm);
  for (const auto& L : layers)
    sum += tensor_bytes(L.input_norm) + L.qkv.bytes() + tensor_bytes(L.qkv_bias) +
           tensor_bytes(L.q_norm) + tensor_bytes(L.k_norm) + tensor_bytes(L.qk_norm) +
           L.out.bytes() + tensor_bytes(L.post_norm) + L.gate_up.bytes() + L.down.bytes();
  return sum;
}

llama_model::llama_model(const checkpoint& ckpt, at::ScalarType dtype, at::Device device,
                         std::optional<weight_format> format)
    : config_(ckpt.config), rope_(rope_inverse_frequencies(ckpt.config),
                                  ckpt.config.context_length, dtype, device) {
  auto w = [&](const std::string& name) {
    return load_weight(ckpt, name, dtype, device);
  };
  const auto& c = config_;
  const bool interleaved = c.rope == rope_pairs::interleaved;
  // A matrix of the checkpoint tensors `parts` stacked by rows, q/k rows (`rotated`
  // parts of an interleaved checkpoint) in rotate_half order (Note [rotary layouts]).
  // Blocks the file holds (a GGUF's) are served as they are when they are no wider
  // than `format` (int4 blocks stay int4 where int8 or bfloat16 is asked: widening
  // adds no precision); float weights, and blocks wider than asked, are rounded or
  // quantized into `format`, or kept dense when it is nullopt.
  auto stacked = [&](const std::vector<std::pair<std::string, bool>>& parts,
                     std::optional<weight_format> format) {
    const auto stored = stored_blocks(ckpt, parts);
    if (format && stored &&
        bits_per_weight(format_of(*stored)) <= bits_per_weight(*format)) {
      std::vector<std::vector<std::byte>> reordered; // owns permuted q/k rows
      std::vector<const std::byte*> rows;
      for (const auto& [name, rotated] : parts) {
        const auto& view = ckpt.tensors.at(name);
        const std::byte* base = view.data;
        if (rotated && interleaved)
          base =
              reordered.emplace_back(interleaved_to_rotate_half(view, c.head_dim)).data();
        const auto row_bytes = byte_size(view) / static_cast<std::size_t>(view.shape[0]);
        for (std::int64_t r = 0; r < view.shape[0]; ++r)
          rows.push_back(base + static_cast<std::size_t>(r) * row_bytes);
      }
      return projection{at::Tensor(), at::Tensor(),
                        std::make_shared<const block_matrix>(
                            *stored, rows, ckpt.tensors.at(parts[0].first).shape[1])};
    }
    std::vector<at::Tensor> rows;
    for (const auto& [name, rotated] : parts) {
      auto t = w(name);
      rows.push_back(rotated && interleaved
                         ? to_rotate_half(t, t.size(0) / c.head_dim, c.head_dim)
                         : t);
    }
    return make_projection(rows.size() == 1 ? rows[0] : at::cat(rows, 0), format);
  };
  auto matrix = [&](const std::string& name) { return stacked({{name, false}}, format); };
  // The head turns the last hidden state into every log-prob: int4 keeps it (and the
  // embeddings it may share) in int8, unless the file holds it in int4.
  const auto table_format =
      format == weight_format::q4_0 ? std::optional(weight_format::q8_0) : format;
  const std::string embed = "model.embed_tokens.weight";
  const std::string head = c.tied_embeddings ? embed : "lm_head.weight";
  w_.head = stacked({{head, false}}, table_format);
  if (!format)
    w_.embed.dense = w(embed);
  else
    w_.embed = token_embedding::rows_of(
        c.tied_embeddings ? w_.head : stacked({{embed, false}}, table_format));
  w_.norm = w("model.norm.weight");
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    const auto q_norm = c.qk_norm ? w(p + "self_attn.q_norm.weight") : at::Tensor();
    const auto k_norm = c.qk_norm ? w(p + "self_attn.k_norm.weight") : at::Tensor();
    w_.layers.push_back(
        {w(p + "input_layernorm.weight"),
         stacked({{p + "self_attn.q_proj.weight", true},
                  {p + "self_attn.k_proj.weight", true},
                  {p + "self_attn.v_proj.weight", false}},
                 format),
         c.qkv_bias
             ? at::cat({w(p + "self_attn.q_proj.bias"), w(p + "self_attn.k_proj.bias"),
                        w(p + "self_attn.v_proj.bias")})
             : at::Tensor(),
         q_norm, k_norm, matrix(p + "self_attn.o_proj.weight"),
         w(p + "post_attention_layernorm.weight"),
         stacked({{p + "mlp.gate_proj.weight", false}, {p + "mlp.up_proj.weight", false}},
                 format),
         matrix(p + "mlp.down_proj.weight"),
         c.qk_norm ? at::cat({q_norm.expand({c.num_heads, c.head_dim}),
                              k_norm.expand({c.num_kv_heads, c.head_dim})})
                   : at::Tensor()});
  }
}

at::Tensor llama_model::rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
  // In float32 whatever the compute dtype, as HF's LlamaRMSNorm.
#if CANOPY_HAS_ATEN_RMS_NORM
  // LibTorch's own takes the same steps, fused into one kernel where it has one. Its
  // weight must be one row; q and k's, one row per head, multiply after.
  const std::int64_t width = x.size(-1);
  if (weight.dim() == 1)
    return at::rms_norm(x, {width}, weight, config_.norm_eps);
  return at::rms_norm(x, {width}, std::nullopt, config_.norm_eps) * weight;
#else
  const auto xf = x.to(at::kFloat);
  const auto scale = at::rsqrt(xf.pow(2).mean(-1, true) + config_.norm_eps);
  return (xf * scale).to(x.scalar_type()) * weight;
#endif
}

const rope_table&
llama_model::rope_for(const std::vector<std::int64_t>& positions) const {
  if (!positions.empty())
    rope_.cover(*std::max_element(positions.begin(), positions.end()) + 1);
  return rope_;
}

std::int64_t llama_model::prepare_positions(std::int64_t end) const {
  rope_.cover(end);
  return rope_.covered();
}

at::Tensor llama_model::rotate(const at::Tensor& x, const at::Tensor& cos,
                               const at::Tensor& signed_sin) const {
  const auto half = config_.head_dim / 2;
  const auto swapped = at::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return at::addcmul(x * cos, swapped, signed_sin);
}

at::Tensor llama_model::forward(const at::Tensor& tokens, const device_layout& layout,
                                const pass_kv& kv, const at::Tensor& rows,
                                const lora_spans& adapters) const {
  const auto& c = config_;
  const auto T = tokens.size(0);
  const auto H = c.num_heads, KV = c.num_kv_heads, hd = c.head_dim;
  const auto& rope = rope_for(layout.host->positions);
  const auto cos =
      rope.cos().index_select(0, layout.positions).unsqueeze(1); // [T, 1, hd]
  // rotate_half(x) sin = [x2, x1] [-sin, sin] (halves): the sign folded in once a pass.
  auto signed_sin = rope.sin().index_select(0, layout.positions).unsqueeze(1);
  signed_sin.narrow(-1, 0, hd / 2).neg_();
  auto x = w_.embed.lookup(tokens); // [T, D]
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const auto& L = w_.layers[static_cast<std::size_t>(l)];
    const auto normed = rms_norm(x, L.input_norm);
    auto projected = project(normed, L.qkv);
    add_lora_deltas(adapters, lora_site::qkv, l, normed, projected);
    const auto qkv = L.qkv_bias.defined() ? projected + L.qkv_bias : projected;
    // q and k side by side, normed and rotated together: half the kernels.
    auto qk = qkv.narrow(1, 0, (H + KV) * hd).view({T, H + KV, hd});
    if (L.qk_norm.defined())
      qk = rms_norm(qk, L.qk_norm);
    qk = rotate(qk, cos, signed_sin);
    const auto q = qk.narrow(1, 0, H), k = qk.narrow(1, H, KV);
    const auto v = qkv.narrow(1, (H + KV) * hd, KV * hd).reshape({T, KV, hd});
    const auto attention = ragged_attention(q, kv.sources(l, k, v), layout);
    add_projection(attention, L.out, x);
    add_lora_deltas(adapters, lora_site::out, l, attention, x);
    const auto post_normed = rms_norm(x, L.post_norm);
    auto gate_up = project(post_normed, L.gate_up);
    add_lora_deltas(adapters, lora_site::gate_up, l, post_normed, gate_up);
    const auto F = gate_up.size(1) / 2;
    const auto swiglu = at::silu(gate_up.narrow(1, 0, F)) * gate_up.narrow(1, F, F);
    add_projection(swiglu, L.down, x);
    add_lora_deltas(adapters, lora_site::down, l, swiglu, x);
  }
  const auto last = rms_norm(x.index_select(0, rows), w_.norm);
  return log_probs(project(last, w_.head));
}

} // namespace canopy::backends
