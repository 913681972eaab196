#pragma once
// Helpers for the checkpoint tests (scratch files from scratch_files.hpp): a llama2.c
// encoder (the inverse of the loader, to build .bin files from synthetic weights), and
// an assertion that a call throws checkpoint_error whose message names what it must, and
// the HF directory tests' writers and comparisons.
// Thread contract: test-thread only.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/checkpoint_writer.hpp>
#include <canopy/backends/checkpoints/hf_config.hpp>
#include <canopy/backends/checkpoints/synthetic_checkpoint.hpp>

#include "scratch_files.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <unistd.h>

namespace canopy::testing {

inline std::string view_bytes(const backends::tensor_view& view) {
  return {reinterpret_cast<const char*>(view.data), backends::byte_size(view)};
}

inline std::string le32(std::int32_t value) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[static_cast<std::size_t>(i)] =
        static_cast<char>((static_cast<std::uint32_t>(value) >> (8 * i)) & 0xFF);
  return out;
}

inline std::string le64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

/// A safetensors file from literal header JSON followed by `data_bytes` bytes.
inline std::string raw_safetensors(const std::string& header_json,
                                   std::size_t data_bytes) {
  return le64(header_json.size()) + header_json + std::string(data_bytes, '\x01');
}

/// The llama2.c encoding of a float32 llama checkpoint (tensors taken as stored; the
/// RoPE tables are filled with a recognizable pattern the loader must skip).
inline std::string encode_llama2c(const backends::checkpoint& ckpt) {
  const auto& c = ckpt.config;
  const bool untied = !c.tied_embeddings;
  std::string out;
  for (std::int64_t v :
       {c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
        untied ? -c.vocab_size : c.vocab_size, c.context_length})
    out += le32(static_cast<std::int32_t>(v));
  auto add = [&](const std::string& name) { out += view_bytes(ckpt.tensors.at(name)); };
  auto add_layers = [&](const char* rest) {
    for (std::int64_t i = 0; i < c.num_layers; ++i)
      add("model.layers." + std::to_string(i) + "." + rest);
  };
  add("model.embed_tokens.weight");
  add_layers("input_layernorm.weight");
  add_layers("self_attn.q_proj.weight");
  add_layers("self_attn.k_proj.weight");
  add_layers("self_attn.v_proj.weight");
  add_layers("self_attn.o_proj.weight");
  add_layers("post_attention_layernorm.weight");
  add_layers("mlp.gate_proj.weight");
  add_layers("mlp.down_proj.weight");
  add_layers("mlp.up_proj.weight");
  add("model.norm.weight");
  out += std::string(
      static_cast<std::size_t>(2 * c.context_length * (c.head_dim / 2) * 4), '\x7F');
  if (untied)
    add("lm_head.weight");
  return out;
}

/// A small llama or gpt2 checkpoint for building broken files.
inline backends::checkpoint small_checkpoint(backends::architecture arch,
                                             std::uint64_t seed = 7) {
  backends::synthetic_spec spec;
  spec.arch = arch;
  spec.hidden = 16;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = arch == backends::architecture::llama ? 2 : 0;
  spec.intermediate = 24;
  spec.vocab = 40;
  spec.context = 12;
  spec.seed = seed;
  return backends::make_synthetic_checkpoint(spec);
}

/// Every field of two model configurations is the same.
inline void expect_same_config(const backends::model_config& a,
                               const backends::model_config& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope, b.rope);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.scaling.type, b.scaling.type);
  EXPECT_EQ(a.scaling.factor, b.scaling.factor);
  EXPECT_EQ(a.scaling.low_freq_factor, b.scaling.low_freq_factor);
  EXPECT_EQ(a.scaling.high_freq_factor, b.scaling.high_freq_factor);
  EXPECT_EQ(a.scaling.original_context, b.scaling.original_context);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

/// The same tensors, names, dtypes, shapes and bytes.
inline void expect_same_tensors(const backends::checkpoint& a,
                                const backends::checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, view] : a.tensors) {
    auto it = b.tensors.find(name);
    ASSERT_NE(it, b.tensors.end()) << name;
    EXPECT_EQ(view.dtype, it->second.dtype) << name;
    EXPECT_EQ(view.shape, it->second.shape) << name;
    EXPECT_EQ(view_bytes(view), view_bytes(it->second)) << name;
  }
}

/// Writes config.json from `config` (edited by the test) and model.safetensors from
/// `tensors` (edited by the test) into `dir`.
inline void write_dir(const std::filesystem::path& dir, const nlohmann::json& config,
                      const std::map<std::string, backends::tensor_view>& tensors) {
  write_bytes(dir / "config.json", config.dump());
  backends::write_safetensors_file(dir / "model.safetensors", tensors);
}

/// The config.json write_hf_checkpoint would write for `ckpt`.
inline nlohmann::json config_json(const backends::checkpoint& ckpt) {
  return nlohmann::json::parse(
      backends::hf_config_json(ckpt.config, backends::weight_dtype::f32));
}

} // namespace canopy::testing

/// Runs `statement`, which must throw checkpoint_error whose message contains each
/// of the strings in the braced list that follows.
#define EXPECT_CHECKPOINT_ERROR(statement, ...)                                          \
  do {                                                                                   \
    try {                                                                                \
      statement;                                                                         \
      ADD_FAILURE() << "expected checkpoint_error from: " #statement;                    \
    } catch (const ::canopy::backends::checkpoint_error& e) {                            \
      const std::string message = e.what();                                              \
      for (const std::string& part : std::initializer_list<std::string> __VA_ARGS__)     \
        EXPECT_NE(message.find(part), std::string::npos)                                 \
            << "message lacks \"" << part << "\": " << message;                          \
    } catch (const std::exception& e) {                                                  \
      ADD_FAILURE() << "expected checkpoint_error, got another exception: " << e.what(); \
    }                                                                                    \
  } while (false)
