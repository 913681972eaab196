#include "models/direct_llama_forward.hpp"

#include "models/vector_math.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <xmmintrin.h>

namespace canopy::backends {

// Note [direct forward]
// llama_model::forward on stories260K (5 layers, hidden 64) ran one token in ~200 us,
// nearly all of it ATen's dispatch and allocation of ~30 small ops a layer; the
// arithmetic is a few microseconds. On the 110M Llama a lone token spent most of its
// time in sgemm packing weights for a single row (Note [gemv for few rows]). Here
// every op is a loop or one CBLAS call on buffers that outlive the pass, the new KV
// is written once into its storage row, and the attention reads the storage where the
// layout points (cpu_attention_group's loops, or ATen's batched form for groups with
// many queries, on tensors that wrap these buffers).

namespace {

const float* floats(const at::Tensor& t) {
  if (!t.defined())
    return nullptr;
  if (!t.device().is_cpu() || t.scalar_type() != at::kFloat || !t.is_contiguous())
    throw std::invalid_argument(
        "the direct forward needs contiguous float32 CPU weights");
  return t.data_ptr<float>();
}

/// `p`, checked: its dense form must be float32 CPU memory with contiguous rows (maybe
/// padded: Note [padded rows]).
const projection* matrix(const projection& p) {
  const auto& t = p.dense;
  if (t.defined() && (!t.device().is_cpu() || t.scalar_type() != at::kFloat ||
                      t.dim() != 2 || t.stride(1) != 1 || t.stride(0) < t.size(1)))
    throw std::invalid_argument(
        "the direct forward needs float32 CPU weights with contiguous rows");
  return &p;
}

void grow(std::vector<float>& buffer, std::int64_t size) {
  if (static_cast<std::int64_t>(buffer.size()) < size)
    buffer.resize(static_cast<std::size_t>(size));
}

/// dst = src rotated by RoPE in rotate_half form (pairs j, j + hd/2), as
/// llama_model::rotate: x * cos + rotate_half(x) * sin.
void rotate(const float* src, const float* cos, const float* sin, std::int64_t hd,
            float* dst) {
  const auto half = hd / 2;
  for (std::int64_t j = 0; j < half; ++j) {
    dst[j] = src[j] * cos[j] + (-src[j + half]) * sin[j];
    dst[j + half] = src[j + half] * cos[j + half] + src[j] * sin[j + half];
  }
}

/// Each row minus its log-sum-exp; `scratch` holds a row's exponentials.
void log_softmax_rows(float* rows, std::int64_t count, std::int64_t width,
                      float* scratch) {
  for (std::int64_t r = 0; r < count; ++r) {
    float* row = rows + r * width;
    const float top = lane_max(row, width);
    for (std::int64_t v = 0; v < width; ++v)
      scratch[v] = exp_nonpositive(row[v] - top);
    const auto shift = static_cast<float>(top + std::log(lane_sum(scratch, width)));
    for (std::int64_t v = 0; v < width; ++v)
      row[v] -= shift;
  }
}

/// Flushes denormal floats to zero on this thread while alive. Attention weights of
/// distant keys underflow into denormals, whose arithmetic is ~100x slower; on
/// stories260K this took a decoding pass's attention from 68 to 42 us. A value below
/// 1.2e-38 changes no log-prob a float can show.
class denormals_flushed {
public:
  denormals_flushed() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | flush_to_zero | denormals_are_zero);
  }
  ~denormals_flushed() { _mm_setcsr(saved_); }
  denormals_flushed(const denormals_flushed&) = delete;
  denormals_flushed& operator=(const denormals_flushed&) = delete;

private:
  static constexpr unsigned flush_to_zero = 0x8000, denormals_are_zero = 0x0040;
  unsigned saved_;
};

} // namespace

direct_llama_forward::direct_llama_forward(const llama_model& model)
    : model_(model), c_(model.config()), embed_(model.weights().embed),
      head_(*matrix(model.weights().head)), norm_(floats(model.weights().norm)) {
  floats(embed_.dense);
  for (const auto& L : model.weights().layers)
    layers_.push_back({floats(L.input_norm), floats(L.qkv_bias), floats(L.q_norm),
                       floats(L.k_norm), floats(L.post_norm), matrix(L.qkv),
                       matrix(L.out), matrix(L.gate_up), matrix(L.down)});
}

void direct_llama_forward::rms_norm(const float* x, const float* weight,
                                    std::int64_t rows, std::int64_t width,
                                    float* out) const {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * width;
    double squares = 0;
    for (std::int64_t i = 0; i < width; ++i)
      squares += static_cast<double>(in[i]) * in[i];
    const auto scale = static_cast<float>(
        1.0 / std::sqrt(static_cast<float>(squares / static_cast<double>(width)) +
                        c_.norm_eps));
    float* o = out + r * width;
    for (std::int64_t i = 0; i < width; ++i)
      o[i] = (in[i] * scale) * weight[i];
  }
}

void direct_llama_forward::place_qkv(std::int64_t t, std::int64_t position,
                                     std::int64_t slot, std::int64_t layer,
                                     kv_storage& storage) {
  const auto& L = layers_[static_cast<std::size_t>(layer)];
  const auto H = c_.num_heads, KV = c_.num_kv_heads, hd = c_.head_dim;
  const auto width = (H + 2 * KV) * hd;
  float* row = qkv_.data() + t * width;
  if (L.qkv_bias)
    for (std::int64_t i = 0; i < width; ++i)
      row[i] += L.qkv_bias[i];
  if (L.q_norm) { // per head, in place: the rows are this pass's scratch
    rms_norm(row, L.q_norm, H, hd, row);
    rms_norm(row + H * hd, L.k_norm, KV, hd, row + H * hd);
  }
  const float* cos = cos_ + position * hd;
  const float* sin = sin_ + position * hd;
  for (std::int64_t h = 0; h < H; ++h)
    rotate(row + h * hd, cos, sin, hd, q_.data() + (t * H + h) * hd);
  for (std::int64_t h = 0; h < KV; ++h)
    rotate(row + (H + h) * hd, cos, sin, hd, key_.data() + h * hd);
  storage.write_row(layer, slot, key_.data(), row + (H + KV) * hd);
}

const float* direct_llama_forward::forward(const std::vector<std::int64_t>& tokens,
                                           const device_layout& layout,
                                           kv_storage& storage,
                                           const std::vector<std::int64_t>& slots,
                                           const std::vector<std::int64_t>& rows,
                                           const lora_spans& adapters,
                                           profile_clock& clock) {
  const denormals_flushed flushed;
  const auto T = static_cast<std::int64_t>(tokens.size());
  const auto R = static_cast<std::int64_t>(rows.size());
  const auto D = c_.hidden_size, H = c_.num_heads, KV = c_.num_kv_heads, hd = c_.head_dim;
  const auto F = c_.intermediate_size, V = c_.vocab_size;
  grow(x_, T * D);
  grow(normed_, T * D);
  grow(qkv_, T * (H + 2 * KV) * hd);
  grow(q_, T * H * hd);
  grow(key_, KV * hd);
  grow(attention_, T * H * hd);
  grow(gate_up_, T * 2 * F);
  grow(swiglu_, T * F);
  grow(last_, R * D);
  grow(logits_, R * V);

  for (std::int64_t t = 0; t < T; ++t)
    embed_.row_into(tokens[static_cast<std::size_t>(t)], x_.data() + t * D);
  const auto q = at::from_blob(q_.data(), {T, H, hd}, at::kFloat);
  // y[T, width_y] += the adapters' deltas from x[T, width_x] (ATen views of the buffers).
  auto add_adapters = [&](lora_site site, std::int64_t l, std::vector<float>& x,
                          std::int64_t width_x, std::vector<float>& y,
                          std::int64_t width_y) {
    if (adapters.empty())
      return;
    auto out = at::from_blob(y.data(), {T, width_y}, at::kFloat);
    add_lora_deltas(adapters, site, l, at::from_blob(x.data(), {T, width_x}, at::kFloat),
                    out);
  };
  auto attention = at::from_blob(attention_.data(), {T, H * hd}, at::kFloat);
  const auto& positions = layout.host->positions;
  const auto& rope = model_.rope_for(positions);
  cos_ = floats(rope.cos());
  sin_ = floats(rope.sin());
  clock.lap("embed");
  for (std::int64_t l = 0; l < c_.num_layers; ++l) {
    const auto& L = layers_[static_cast<std::size_t>(l)];
    rms_norm(x_.data(), L.input_norm, T, D, normed_.data());
    project_into(normed_.data(), T, *L.qkv, qkv_.data(), false);
    add_adapters(lora_site::qkv, l, normed_, D, qkv_, (H + 2 * KV) * hd);
    clock.lap(l, "norm, qkv projection");
    for (std::int64_t t = 0; t < T; ++t)
      place_qkv(t, positions[static_cast<std::size_t>(t)],
                slots[static_cast<std::size_t>(t)], l, storage);
    clock.lap(l, "RoPE, KV write");
    ragged_attention_into(q, storage.layer(l), layout, attention);
    clock.lap(l, "attention");
    project_into(attention_.data(), T, *L.out, x_.data(), true);
    add_adapters(lora_site::out, l, attention_, H * hd, x_, D);
    clock.lap(l, "output projection");
    rms_norm(x_.data(), L.post_norm, T, D, normed_.data());
    project_into(normed_.data(), T, *L.gate_up, gate_up_.data(), false);
    add_adapters(lora_site::gate_up, l, normed_, D, gate_up_, 2 * F);
    for (std::int64_t t = 0; t < T; ++t) {
      const float* gate = gate_up_.data() + t * 2 * F;
      const float* up = gate + F;
      float* out = swiglu_.data() + t * F;
      for (std::int64_t f = 0; f < F; ++f)
        out[f] = silu(gate[f]) * up[f];
    }
    project_into(swiglu_.data(), T, *L.down, x_.data(), true);
    add_adapters(lora_site::down, l, swiglu_, F, x_, D);
    clock.lap(l, "norm, MLP");
  }
  for (std::int64_t r = 0; r < R; ++r)
    rms_norm(x_.data() + rows[static_cast<std::size_t>(r)] * D, norm_, 1, D,
             last_.data() + r * D);
  project_into(last_.data(), R, head_, logits_.data(), false);
  clock.lap("final norm, LM head");
  grow(exponentials_, V);
  log_softmax_rows(logits_.data(), R, V, exponentials_.data());
  clock.lap("log-softmax");
  return logits_.data();
}

} // namespace canopy::backends
