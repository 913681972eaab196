// GGUF files: the metadata and tensor directory of a file llama.cpp's own gguf-py wrote
// (gguf/blocks.gguf), every malformed header refused by name without reading out of
// bounds, and GGUF models mapped to the canonical checkpoint (config from the
// metadata, HF tensor names, interleaved q/k rows for "llama") or refused by name.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/gguf_checkpoint.hpp>
#include <canopy/backends/checkpoints/gguf_file.hpp>

#include "checkpoint_test_support.hpp"
#include "gguf_writer.hpp"

#include <gtest/gtest.h>

namespace {

using namespace canopy::backends;
using canopy::testing::gguf_of;
using canopy::testing::gguf_writer;
using canopy::testing::read_bytes;
using canopy::testing::scratch_dir;
using canopy::testing::small_checkpoint;
using canopy::testing::view_bytes;
using canopy::testing::write_bytes;

const std::filesystem::path fixture = CANOPY_GGUF_FIXTURE_DIR "/blocks.gguf";

TEST(gguf_file, reads_what_llama_cpps_writer_wrote) {
  const gguf_file file(fixture);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.string("general.architecture"), "llama");
  EXPECT_EQ(file.integer("test.u32"), 7);
  EXPECT_EQ(file.number("test.f32"), 0.25);
  EXPECT_EQ(file.string("test.string"), "caf\xc3\xa9");
  EXPECT_EQ(file.integer("test.bool"), 1);
  EXPECT_EQ(*file.array<std::string>("test.strings"),
            (std::vector<std::string>{"a", "",
                                      "\xe2\x96\x81"
                                      "b"}));
  EXPECT_EQ(*file.array<double>("test.floats"), (std::vector<double>{1.5, -2.0}));
  EXPECT_FALSE(file.integer("absent"));
  EXPECT_CHECKPOINT_ERROR(file.integer("test.string"), {"'test.string'", "an integer"});

  struct expected {
    const char* name;
    const char* type;
    std::vector<std::int64_t> shape;
    std::uint64_t bytes;
  };
  const std::vector<expected> tensors{{"q8", "Q8_0", {3, 64}, 3 * 2 * 34},
                                      {"q4", "Q4_0", {2, 96}, 2 * 3 * 18},
                                      {"f16", "F16", {2, 5}, 20},
                                      {"bf16", "BF16", {3}, 6},
                                      {"f32", "F32", {2, 3}, 24}};
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = file.tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.type_name, tensors[i].type) << t.name;
    EXPECT_EQ(t.shape, tensors[i].shape) << t.name;
    EXPECT_EQ(t.bytes, tensors[i].bytes) << t.name;
    ASSERT_NE(t.data, nullptr) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 32, 0u) << t.name;
  }
}

TEST(gguf_file, opened_without_its_arrays_it_reads_the_rest_alike) {
  const gguf_file whole(fixture);
  const gguf_file file(fixture, gguf_arrays::skip);
  EXPECT_EQ(file.string("general.architecture"), "llama");
  EXPECT_EQ(file.integer("test.u32"), 7);
  EXPECT_EQ(file.number("test.f32"), 0.25);
  EXPECT_EQ(file.string("test.string"), "caf\xc3\xa9");
  EXPECT_CHECKPOINT_ERROR(file.array<std::string>("test.strings"),
                          {"'test.strings'", "skipped"});
  EXPECT_CHECKPOINT_ERROR(file.array<double>("test.floats"),
                          {"'test.floats'", "skipped"});
  EXPECT_FALSE(file.array<double>("absent"));
  ASSERT_EQ(file.tensors().size(), whole.tensors().size());
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    EXPECT_EQ(file.tensors()[i].name, whole.tensors()[i].name);
    EXPECT_EQ(file.tensors()[i].data - file.storage()->data(),
              whole.tensors()[i].data - whole.storage()->data());
  }
}

TEST(gguf_file, every_truncation_is_refused_and_named) {
  const std::string bytes = read_bytes(fixture);
  const gguf_file whole(fixture);
  const auto* base = whole.storage()->data();
  std::size_t needed = 0;
  for (const auto& t : whole.tensors())
    needed = std::max(needed, static_cast<std::size_t>(t.data - base) + t.bytes);
  scratch_dir dir;
  for (std::size_t n = 0; n < needed; ++n) {
    write_bytes(dir / "cut.gguf", bytes.substr(0, n));
    for (const auto arrays : {gguf_arrays::keep, gguf_arrays::skip})
      EXPECT_THROW(gguf_file(dir / "cut.gguf", arrays), checkpoint_error)
          << n << " bytes";
  }
}

TEST(gguf_file, any_byte_of_the_directory_overwritten_loads_or_is_refused) {
  const std::string bytes = read_bytes(fixture);
  const gguf_file whole(fixture);
  const auto directory_end =
      static_cast<std::size_t>(whole.tensors().front().data - whole.storage()->data());
  scratch_dir dir;
  for (std::size_t at = 0; at < directory_end; ++at)
    for (const char with : {'\x00', '\x7f', '\xff'}) {
      std::string mutated = bytes;
      mutated[at] = with;
      write_bytes(dir / "m.gguf", mutated);
      for (const auto arrays : {gguf_arrays::keep, gguf_arrays::skip})
        try {
          const gguf_file file(dir / "m.gguf", arrays);
          for (const auto& t : file.tensors()) // what loads lies inside the file
            if (t.data) {
              EXPECT_LE(static_cast<std::size_t>(t.data - file.storage()->data()) +
                            t.bytes,
                        mutated.size());
            }
        } catch (const checkpoint_error&) {
        } catch (const std::exception& e) {
          ADD_FAILURE() << "byte " << at << ": " << e.what();
        }
    }
}

TEST(gguf_file, malformed_headers_are_named) {
  const std::string bytes = read_bytes(fixture);
  scratch_dir dir;
  const auto path = dir / "m.gguf";
  auto patched = [&](std::size_t at, const std::string& with) {
    std::string out = bytes;
    out.replace(at, with.size(), with);
    write_bytes(path, out);
    return path;
  };
  using canopy::testing::le32;
  using canopy::testing::le64;
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(0, "GGUX")},
                          {path.string(), "no GGUF magic"});
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(4, le32(1))}, {"GGUF version 1"});
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(4, le32(0x03000000))}, {"big-endian"});
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(8, le64(1ull << 40))},
                          {"the tensor count is 1099511627776"});
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(16, le64(~0ull))}, {"the metadata count"});
  // The first key's length, then its value type.
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(24, le64(1ull << 62))},
                          {"a metadata key", "claims"});
  const std::string first_key = "general.architecture";
  ASSERT_EQ(bytes.substr(32, first_key.size()), first_key);
  EXPECT_CHECKPOINT_ERROR(gguf_file{patched(32 + first_key.size(), le32(13))},
                          {"'general.architecture'", "unknown value type 13"});
}

TEST(gguf_file, tensors_outside_the_file_or_misaligned_are_named) {
  const auto ckpt = small_checkpoint(architecture::llama);
  gguf_writer w;
  canopy::testing::add_model_metadata(w, ckpt.config);
  w.tensor("a", canopy::testing::ggml_type::f32, {64}, std::string(256, '\0'));
  std::string bytes = w.bytes();
  scratch_dir dir;
  write_bytes(dir / "m.gguf", bytes.substr(0, bytes.size() - 4));
  EXPECT_CHECKPOINT_ERROR(gguf_file{dir / "m.gguf"},
                          {"tensor 'a'", "runs past the end", "truncated"});
  // Its offset (after the name, n_dims, the dim and the type) moved off the alignment.
  using canopy::testing::le32;
  using canopy::testing::le64;
  const auto entry = bytes.find(le64(1) + "a" + le32(1) + le64(64));
  ASSERT_NE(entry, std::string::npos);
  bytes.replace(entry + 8 + 1 + 4 + 8 + 4, 8, le64(4));
  write_bytes(dir / "m.gguf", bytes);
  EXPECT_CHECKPOINT_ERROR(gguf_file{dir / "m.gguf"},
                          {"tensor 'a'", "offset 4", "alignment 32"});
}

std::filesystem::path write_model(const scratch_dir& dir, const checkpoint& ckpt) {
  write_bytes(dir / "m.gguf", gguf_of(ckpt, canopy::testing::as_f32));
  return dir / "m.gguf";
}

TEST(gguf_checkpoint, llama_maps_to_the_canonical_checkpoint) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  const auto path = write_model(dir, original);
  const checkpoint loaded = load_checkpoint(path);
  model_config expected = original.config;
  expected.rope = rope_pairs::interleaved; // llama.cpp's converter interleaved q/k
  expected.norm_eps = static_cast<float>(expected.norm_eps);
  canopy::testing::expect_same_config(loaded.config, expected);
  canopy::testing::expect_same_config(load_model_config(path), expected);
  ASSERT_EQ(loaded.tensors.size(), original.tensors.size());
  for (const auto& [name, view] : original.tensors) {
    ASSERT_EQ(loaded.tensors.count(name), 1u) << name;
    const auto& got = loaded.tensors.at(name);
    EXPECT_EQ(got.dtype, weight_dtype::f32) << name;
    EXPECT_EQ(got.shape, view.shape) << name;
    const bool qk = name.find("q_proj.weight") != std::string::npos ||
                    name.find("k_proj.weight") != std::string::npos;
    if (!qk) {
      EXPECT_EQ(view_bytes(got), view_bytes(view)) << name;
      continue;
    }
    // Interleaved in the file, back to rotate_half as the writer's inverse.
    EXPECT_NE(view_bytes(got), view_bytes(view)) << name;
    const auto back = interleaved_to_rotate_half(got, expected.head_dim);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.data()), back.size()),
              view_bytes(view))
        << name;
  }
}

TEST(gguf_checkpoint, rope_freqs_become_per_frequency_factors) {
  checkpoint original = small_checkpoint(architecture::llama);
  original.config.scaling.type = rope_scaling::kind::llama3;
  original.config.scaling.factor = 8;
  original.config.scaling.original_context = 16;
  scratch_dir dir;
  const auto path = write_model(dir, original);
  const auto factors = canopy::testing::llama3_rope_freqs(original.config);
  ASSERT_EQ(static_cast<std::int64_t>(factors.size()) * 2, original.config.head_dim);
  for (const auto& config : {load_checkpoint(path).config, load_model_config(path)}) {
    EXPECT_EQ(config.scaling.type, rope_scaling::kind::per_frequency);
    EXPECT_EQ(config.scaling.frequency_factors,
              std::vector<double>(factors.begin(), factors.end()));
  }
  // The tensor is the config's, not a weight.
  EXPECT_EQ(load_checkpoint(path).tensors.count("rope_freqs.weight"), 0u);
}

TEST(gguf_checkpoint, untied_head_and_qwen_layouts) {
  checkpoint original = small_checkpoint(architecture::llama);
  original.tensors["lm_head.weight"] = original.tensors.at("model.embed_tokens.weight");
  original.config.tied_embeddings = false;
  original.config.arch = architecture::qwen2; // rotate_half kept, biases expected
  scratch_dir dir;
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(write_model(dir, original)),
                          {"missing tensor", "self_attn.q_proj.bias"});
  original.config.arch = architecture::qwen3;
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(write_model(dir, original)),
                          {"missing tensor", "self_attn.q_norm.weight"});
  original.config.arch = architecture::llama;
  const auto loaded = load_checkpoint(write_model(dir, original));
  EXPECT_FALSE(loaded.config.tied_embeddings);
  EXPECT_EQ(loaded.config.rope, rope_pairs::interleaved);
}

TEST(gguf_checkpoint, what_is_not_served_is_named) {
  const checkpoint ckpt = small_checkpoint(architecture::llama);
  scratch_dir dir;
  const auto path = dir / "m.gguf";
  auto with = [&](const std::function<void(gguf_writer&)>& add) {
    gguf_writer w;
    add(w);
    write_bytes(path, w.bytes());
    return path;
  };
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(with([](gguf_writer& w) {
                            w.add("general.architecture", "phi3");
                          })),
                          {path.string(), "architecture 'phi3' is not served"});
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(with([](gguf_writer& w) {
                            w.add("general.architecture", std::string("llama"));
                          })),
                          {"no llama.embedding_length"});
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(with([&](gguf_writer& w) {
                            canopy::testing::add_model_metadata(w, ckpt.config);
                            w.add("llama.rope.scaling.type", std::string("yarn"));
                          })),
                          {"rope.scaling.type 'yarn' is not served"});
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(with([&](gguf_writer& w) {
                            canopy::testing::add_model_metadata(w, ckpt.config, 2);
                          })),
                          {"rope.dimension_count 2", "partial rotary"});
  // rope_freqs: one F32 factor per rotated pair, and not beside a linear scaling.
  const auto pairs = ckpt.config.head_dim / 2;
  const auto rope_freqs = [&](canopy::testing::ggml_type type, std::int64_t n,
                              const char* scaling) {
    return with([&, type, n, scaling](gguf_writer& w) {
      canopy::testing::add_model_metadata(w, ckpt.config);
      if (*scaling)
        w.add("llama.rope.scaling.type", std::string(scaling));
      w.tensor("token_embd.weight", canopy::testing::ggml_type::f32, {40, 16},
               std::string(40 * 16 * 4, '\0'));
      w.tensor("rope_freqs.weight", type, {n},
               std::string(static_cast<std::size_t>(n) *
                               (type == canopy::testing::ggml_type::f32 ? 4 : 2),
                           '\x3f'));
    });
  };
  EXPECT_CHECKPOINT_ERROR(
      load_model_config(rope_freqs(canopy::testing::ggml_type::f32, pairs + 1, "")),
      {"rope frequency factors: " + std::to_string(pairs + 1), "one per pair"});
  EXPECT_CHECKPOINT_ERROR(
      load_model_config(rope_freqs(canopy::testing::ggml_type::f16, pairs, "")),
      {"tensor 'rope_freqs.weight' is F16", "F32 factors"});
  EXPECT_CHECKPOINT_ERROR(
      load_model_config(rope_freqs(canopy::testing::ggml_type::f32, pairs, "linear")),
      {"'rope_freqs.weight' beside llama.rope.scaling.type 'linear'"});
  // A k-quant tensor, named with its type.
  std::string q6k(210, '\0');
  EXPECT_CHECKPOINT_ERROR(load_checkpoint(with([&](gguf_writer& w) {
                            canopy::testing::add_model_metadata(w, ckpt.config);
                            w.tensor("token_embd.weight", canopy::testing::ggml_type::f32,
                                     {40, 16}, std::string(40 * 16 * 4, '\0'));
                            w.tensor("blk.0.ffn_down.weight",
                                     canopy::testing::ggml_type::q6_k, {1, 256}, q6k);
                          })),
                          {"tensor 'blk.0.ffn_down.weight' is Q6_K", "Q8_0 and Q4_0"});
}

TEST(gguf_checkpoint, a_file_is_told_by_its_magic_whatever_its_name) {
  const checkpoint original = small_checkpoint(architecture::llama);
  scratch_dir dir;
  write_bytes(dir / "model.bin", gguf_of(original, canopy::testing::as_f32));
  EXPECT_EQ(load_checkpoint(dir / "model.bin").config.rope, rope_pairs::interleaved);
}

} // namespace
