#pragma once
// Writing GGUF files in tests (Canopy reads GGUF; it never writes one): metadata, tensors
// in any ggml type from their raw bytes, and a checkpoint as llama.cpp's converter
// would write it. The byte layout follows the GGUF specification; the fixture that
// pins it to llama.cpp's own writer is tests/backends/gguf/blocks.gguf.
// Thread contract: test-thread only.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::testing {

/// ggml_type numbers (ggml.h).
enum class ggml_type : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q8_0 = 8,
  q6_k = 14,
  bf16 = 30,
};

class gguf_writer {
public:
  void add(const std::string& key, std::uint32_t value) {
    entry(key, 4);
    scalar(meta_, value);
  }
  void add(const std::string& key, float value) {
    entry(key, 6);
    scalar(meta_, value);
  }
  void add(const std::string& key, const std::string& value) {
    entry(key, 8);
    text(meta_, value);
  }
  void add(const std::string& key, const std::vector<std::string>& values) {
    entry(key, 9);
    scalar(meta_, std::uint32_t{8});
    scalar(meta_, static_cast<std::uint64_t>(values.size()));
    for (const auto& v : values)
      text(meta_, v);
  }
  void add(const std::string& key, const std::vector<float>& values) {
    entry(key, 9);
    scalar(meta_, std::uint32_t{6});
    scalar(meta_, static_cast<std::uint64_t>(values.size()));
    for (const float v : values)
      scalar(meta_, v);
  }
  void add(const std::string& key, const std::vector<std::int32_t>& values) {
    entry(key, 9);
    scalar(meta_, std::uint32_t{5});
    scalar(meta_, static_cast<std::uint64_t>(values.size()));
    for (const auto v : values)
      scalar(meta_, v);
  }

  /// A tensor of `shape` (outermost first) holding `bytes` as stored.
  void tensor(const std::string& name, ggml_type type,
              const std::vector<std::int64_t>& shape, const std::string& bytes) {
    text(infos_, name);
    scalar(infos_, static_cast<std::uint32_t>(shape.size()));
    for (auto d = shape.rbegin(); d != shape.rend(); ++d)
      scalar(infos_, static_cast<std::uint64_t>(*d));
    scalar(infos_, static_cast<std::uint32_t>(type));
    scalar(infos_, static_cast<std::uint64_t>(data_.size()));
    data_ += bytes;
    data_.append((alignment - data_.size() % alignment) % alignment, '\0');
    ++tensors_;
  }

  std::string bytes() const {
    std::string out = "GGUF";
    scalar(out, std::uint32_t{3});
    scalar(out, tensors_);
    scalar(out, entries_);
    out += meta_ + infos_;
    out.append((alignment - out.size() % alignment) % alignment, '\0');
    return out + data_;
  }

  static constexpr std::size_t alignment = 32;

private:
  template <class T> static void scalar(std::string& out, T value) {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T)); // the test hosts are little-endian, as GGUF
    out.append(raw, sizeof(T));
  }
  static void text(std::string& out, const std::string& value) {
    scalar(out, static_cast<std::uint64_t>(value.size()));
    out += value;
  }
  void entry(const std::string& key, std::uint32_t type) {
    text(meta_, key);
    scalar(meta_, type);
    ++entries_;
  }

  std::string meta_, infos_, data_;
  std::uint64_t entries_ = 0, tensors_ = 0;
};

/// The GGUF name of a canonical llama-family tensor name (gguf_checkpoint.hpp's map,
/// inverted).
inline std::string gguf_tensor_name(const std::string& name) {
  if (name == "model.embed_tokens.weight")
    return "token_embd.weight";
  if (name == "model.norm.weight")
    return "output_norm.weight";
  if (name == "lm_head.weight")
    return "output.weight";
  static const std::vector<std::pair<std::string, std::string>> rest{
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  const std::string prefix = "model.layers.";
  const auto dot = name.find('.', prefix.size());
  for (const auto& [hf, gguf] : rest)
    if (name.compare(dot + 1, std::string::npos, hf) == 0)
      return "blk." + name.substr(prefix.size(), dot - prefix.size()) + "." + gguf;
  return name;
}

/// The metadata llama.cpp's converter writes for `config` (general.architecture
/// "llama", "qwen2" or "qwen3" and its keys); `rotary_dims` rotated of each head
/// (-1: all).
inline void add_model_metadata(gguf_writer& out, const backends::model_config& c,
                               std::int64_t rotary_dims = -1) {
  const std::string arch = backends::to_string(c.arch);
  out.add("general.architecture", arch);
  out.add(arch + ".context_length", static_cast<std::uint32_t>(c.context_length));
  out.add(arch + ".embedding_length", static_cast<std::uint32_t>(c.hidden_size));
  out.add(arch + ".block_count", static_cast<std::uint32_t>(c.num_layers));
  out.add(arch + ".feed_forward_length", static_cast<std::uint32_t>(c.intermediate_size));
  out.add(arch + ".attention.head_count", static_cast<std::uint32_t>(c.num_heads));
  out.add(arch + ".attention.head_count_kv", static_cast<std::uint32_t>(c.num_kv_heads));
  out.add(arch + ".attention.key_length", static_cast<std::uint32_t>(c.head_dim));
  out.add(arch + ".attention.value_length", static_cast<std::uint32_t>(c.head_dim));
  out.add(arch + ".rope.dimension_count",
          static_cast<std::uint32_t>(rotary_dims < 0 ? c.head_dim : rotary_dims));
  out.add(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  out.add(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  if (c.bos_token_id >= 0)
    out.add("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(c.bos_token_id));
  if (c.eos_token_id >= 0)
    out.add("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(c.eos_token_id));
}

/// Llama 3's rope scaling as llama.cpp's converter writes it (conversion/llama.py,
/// generate_extra_tensors): one factor per rotated pair, computed in float32, which
/// ggml's rope divides each frequency by.
inline std::vector<float> llama3_rope_freqs(const backends::model_config& c) {
  const auto& r = c.scaling;
  const float pi2 = static_cast<float>(2 * M_PI);
  const auto original = static_cast<float>(r.original_context);
  const auto low = static_cast<float>(r.low_freq_factor),
             high = static_cast<float>(r.high_freq_factor),
             factor = static_cast<float>(r.factor);
  std::vector<float> out;
  for (std::int64_t i = 0; i < c.head_dim; i += 2) {
    const float freq =
        1.0f / std::pow(static_cast<float>(c.rope_theta),
                        static_cast<float>(i) / static_cast<float>(c.head_dim));
    const float wavelen = pi2 / freq;
    if (wavelen < original / high) {
      out.push_back(1.0f);
    } else if (wavelen > original / low) {
      out.push_back(factor);
    } else {
      const float smooth = (original / wavelen - low) / (high - low);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

/// How a test stores one canonical tensor: its ggml type and bytes.
using tensor_encoder = std::function<std::pair<ggml_type, std::string>(
    const std::string& name, const std::vector<float>& values,
    const std::vector<std::int64_t>& shape)>;

/// A float32 checkpoint as llama.cpp's converter writes it: GGUF names, a "llama"
/// model's q/k rows in interleaved RoPE order (from rotate_half when the checkpoint
/// holds that), each tensor stored by `encode`, and llama3 rope scaling as rope_freqs.
inline std::string gguf_of(const backends::checkpoint& ckpt,
                           const tensor_encoder& encode) {
  using namespace backends;
  const auto& c = ckpt.config;
  gguf_writer out;
  add_model_metadata(out, c);
  for (const auto& [name, view] : ckpt.tensors) {
    if (view.dtype != weight_dtype::f32)
      throw std::invalid_argument("gguf_of: " + name + " is not float32");
    std::vector<float> values(static_cast<std::size_t>(numel(view)));
    std::memcpy(values.data(), view.data, values.size() * sizeof(float));
    const bool qk = name.find("q_proj.weight") != std::string::npos ||
                    name.find("k_proj.weight") != std::string::npos;
    if (qk && c.arch == architecture::llama && c.rope == rope_pairs::rotate_half) {
      // rotate_half row h*hd + c*hd/2 + j goes to interleaved row h*hd + 2j + c.
      const auto hd = c.head_dim, width = view.shape[1];
      std::vector<float> moved(values.size());
      for (std::int64_t row = 0; row < view.shape[0]; ++row) {
        const auto h = row / hd, within = row % hd, half = within / (hd / 2),
                   j = within % (hd / 2);
        std::memcpy(&moved[static_cast<std::size_t>((h * hd + 2 * j + half) * width)],
                    &values[static_cast<std::size_t>(row * width)],
                    static_cast<std::size_t>(width) * sizeof(float));
      }
      values = std::move(moved);
    }
    const auto [type, bytes] = encode(name, values, view.shape);
    out.tensor(gguf_tensor_name(name), type, view.shape, bytes);
  }
  if (c.scaling.type == rope_scaling::kind::llama3) {
    const auto factors = llama3_rope_freqs(c);
    out.tensor("rope_freqs.weight", ggml_type::f32,
               {static_cast<std::int64_t>(factors.size())},
               std::string(reinterpret_cast<const char*>(factors.data()),
                           factors.size() * sizeof(float)));
  }
  return out.bytes();
}

/// Every tensor in float32.
inline std::pair<ggml_type, std::string> as_f32(const std::string&,
                                                const std::vector<float>& values,
                                                const std::vector<std::int64_t>&) {
  return {ggml_type::f32, std::string(reinterpret_cast<const char*>(values.data()),
                                      values.size() * sizeof(float))};
}

} // namespace canopy::testing
