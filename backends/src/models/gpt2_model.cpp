#include "models/gpt2_model.hpp"

#include "models/torch_weights.hpp"

#include <stdexcept>
#include <string>

namespace canopy::backends {

gpt2_model::gpt2_model(const checkpoint& ckpt, at::ScalarType dtype, at::Device device)
    : config_(ckpt.config) {
  auto w = [&](const std::string& name) {
    return load_weight(ckpt, name, dtype, device);
  };
  auto n = [&](const std::string& name) {
    return norm{w(name + ".weight"), w(name + ".bias")};
  };
  wte_ = w("transformer.wte.weight");
  head_ = in_out(config_.tied_embeddings ? wte_ : w("lm_head.weight"));
  wpe_ = w("transformer.wpe.weight");
  ln_f_ = n("transformer.ln_f");
  for (std::int64_t l = 0; l < config_.num_layers; ++l) {
    const auto p = "transformer.h." + std::to_string(l) + ".";
    layers_.push_back({n(p + "ln_1"), w(p + "attn.c_attn.weight"),
                       w(p + "attn.c_attn.bias"), w(p + "attn.c_proj.weight"),
                       w(p + "attn.c_proj.bias"), n(p + "ln_2"), w(p + "mlp.c_fc.weight"),
                       w(p + "mlp.c_fc.bias"), w(p + "mlp.c_proj.weight"),
                       w(p + "mlp.c_proj.bias")});
  }
}

std::size_t gpt2_model::weight_bytes() const {
  std::size_t sum = 0;
  for (const auto& t : {wte_, head_, wpe_, ln_f_.weight, ln_f_.bias})
    sum += tensor_bytes(t);
  for (const auto& L : layers_)
    for (const auto& t :
         {L.ln_1.weight, L.ln_1.bias, L.attn_w, L.attn_b, L.proj_w, L.proj_b,
          L.ln_2.weight, L.ln_2.bias, L.fc_w, L.fc_b, L.out_w, L.out_b})
      sum += tensor_bytes(t);
  return sum;
}

std::size_t gpt2_model::lookup_table_bytes() const {
  return tensor_bytes(wte_) + tensor_bytes(wpe_); // the head is a copy of its own
}

at::Tensor gpt2_model::layer_norm(const at::Tensor& x, const norm& n) const {
  return at::layer_norm(x, {config_.hidden_size}, n.weight, n.bias, config_.norm_eps);
}

std::int64_t gpt2_model::prepare_positions(std::int64_t end) const {
  if (end > config_.context_length)
    throw std::invalid_argument("position " + std::to_string(end - 1) +
                                " is past the context of " +
                                std::to_string(config_.context_length));
  return 0;
}

at::Tensor gpt2_model::forward(const at::Tensor& tokens, const device_layout& layout,
                               const pass_kv& kv, const at::Tensor& rows,
                               const lora_spans& adapters) const {
  if (!adapters.empty())
    throw std::invalid_argument("LoRA adapters apply to Llama-family models, not GPT-2");
  const auto& c = config_;
  const auto T = tokens.size(0);
  const auto H = c.num_heads, hd = c.head_dim, D = c.hidden_size;
  auto x =
      wte_.index_select(0, tokens) + wpe_.index_select(0, layout.positions); // [T, D]
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const auto& L = layers_[static_cast<std::size_t>(l)];
    // Conv1D: the weight is [in, out], so x W + b (addmm), not linear's x W^T.
    const auto qkv = at::addmm(L.attn_b, layer_norm(x, L.ln_1), L.attn_w); // [T, 3D]
    const auto q = qkv.narrow(1, 0, D).view({T, H, hd});
    const auto k = qkv.narrow(1, D, D).reshape({T, H, hd});
    const auto v = qkv.narrow(1, 2 * D, D).reshape({T, H, hd});
    x = x +
        at::addmm(L.proj_b, ragged_attention(q, kv.sources(l, k, v), layout), L.proj_w);
    // gelu_new is the tanh approximation; the erf GELU is off by ~4e-3 (oracle README).
    const auto hidden =
        at::gelu(at::addmm(L.fc_b, layer_norm(x, L.ln_2), L.fc_w), "tanh");
    x = x + at::addmm(L.out_b, hidden, L.out_w);
  }
  return log_probs(at::mm(layer_norm(x.index_select(0, rows), ln_f_), head_));
}

} // namespace canopy::backends
