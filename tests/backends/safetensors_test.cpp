// The safetensors header parser: every malformed header is a checkpoint_error naming
// the file and the tensor; valid headers (including the reference writer's quirks:
// __metadata__, space padding, empty tensors) parse to the right entries.

#include <canopy/backends/checkpoints/safetensors.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace {

using namespace canopy::backends;
using canopy::testing::le64;
using canopy::testing::raw_safetensors;

const std::string file = "dir/w.safetensors";

safetensors_header parse(const std::string& bytes) {
  return parse_safetensors_header(bytes, file);
}

TEST(safetensors_header, parses_entries_metadata_and_offsets) {
  const std::string bytes = raw_safetensors(
      R"({"__metadata__": {"format": "pt"},)"
      R"( "b": {"dtype": "F16", "shape": [2, 3], "data_offsets": [16, 28]},)"
      R"( "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
      R"( "s": {"dtype": "BF16", "shape": [], "data_offsets": [28, 30]},)"
      R"( "z": {"dtype": "F32", "shape": [0, 5], "data_offsets": [30, 30]}})",
      30);
  const safetensors_header h = parse(bytes);
  EXPECT_EQ(h.data_offset, bytes.size() - 30);
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors.at("a").dtype, weight_dtype::f32);
  EXPECT_EQ(h.tensors.at("a").shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(h.tensors.at("b").dtype, weight_dtype::f16);
  EXPECT_EQ(h.tensors.at("b").begin, 16u);
  EXPECT_EQ(h.tensors.at("b").end, 28u);
  EXPECT_EQ(h.tensors.at("s").dtype, weight_dtype::bf16);
  EXPECT_TRUE(h.tensors.at("s").shape.empty());
  EXPECT_EQ(h.tensors.at("z").shape, (std::vector<std::int64_t>{0, 5}));

  const auto views = safetensors_views(h, bytes);
  EXPECT_EQ(reinterpret_cast<const char*>(views.at("b").data),
            bytes.data() + h.data_offset + 16);
}

TEST(safetensors_header, encode_round_trips_and_pads_to_eight_bytes) {
  const float a[3] = {1.0f, -2.5f, 3.25f};
  const std::uint16_t b[2] = {0x3C00, 0xC000};
  std::map<std::string, tensor_view> tensors{
      {"a", {weight_dtype::f32, {3}, reinterpret_cast<const std::byte*>(a)}},
      {"b", {weight_dtype::bf16, {1, 2}, reinterpret_cast<const std::byte*>(b)}}};
  const std::string bytes = encode_safetensors(tensors, {{"k", "v"}});
  const safetensors_header h = parse(bytes);
  EXPECT_EQ(h.data_offset % 8, 0u);
  EXPECT_EQ(h.metadata.at("k"), "v");
  const auto views = safetensors_views(h, bytes);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(std::memcmp(views.at("a").data, a, sizeof a), 0);
  EXPECT_EQ(std::memcmp(views.at("b").data, b, sizeof b), 0);
  EXPECT_EQ(views.at("b").shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(views.at("b").dtype, weight_dtype::bf16);
}

TEST(safetensors_header, rejects_files_too_short_for_the_length) {
  EXPECT_CHECKPOINT_ERROR(parse("abc"), {file, "too short"});
  EXPECT_CHECKPOINT_ERROR(parse(""), {file, "too short"});
}

TEST(safetensors_header, rejects_length_past_the_end) {
  EXPECT_CHECKPOINT_ERROR(parse(le64(100) + "{}"), {file, "past the end"});
}

TEST(safetensors_header, rejects_absurd_length) {
  EXPECT_CHECKPOINT_ERROR(parse(le64(~std::uint64_t{0}) + "{}"), {file, "absurd"});
  EXPECT_CHECKPOINT_ERROR(parse(le64(max_safetensors_header_bytes + 1) + "{}"),
                          {file, "absurd"});
}

TEST(safetensors_header, rejects_header_that_is_not_json) {
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors("{\"a\": ", 0)),
                          {file, "not valid JSON"});
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors("", 0)), {file, "not valid JSON"});
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors("{\"\xff\": 1}", 0)), {file, "JSON"});
}

TEST(safetensors_header, rejects_header_that_is_not_an_object) {
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors("[1, 2]", 0)),
                          {file, "not a JSON object"});
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors("42", 0)), {file, "not a JSON object"});
}

TEST(safetensors_header, rejects_deep_nesting) {
  const std::string deep =
      "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors(deep, 0)), {file, "nests"});
}

TEST(safetensors_header, rejects_entry_that_is_not_an_object) {
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors(R"({"w.0": [1]})", 0)),
                          {file, "'w.0'", "not an object"});
}

TEST(safetensors_header, rejects_missing_fields) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(R"({"w.0": {"shape": [1], "data_offsets": [0, 4]}})", 4)),
      {file, "'w.0'", "dtype"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(R"({"w.1": {"dtype": "F32", "data_offsets": [0, 4]}})", 4)),
      {file, "'w.1'", "shape"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(R"({"w.2": {"dtype": "F32", "shape": [1]}})", 4)),
      {file, "'w.2'", "data_offsets"});
}

TEST(safetensors_header, rejects_unsupported_dtype_by_name) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8)),
      {file, "'ids'", "I64", "F32, F16, BF16"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"ids": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})", 4)),
      {file, "'ids'", "dtype"});
}

TEST(safetensors_header, rejects_bad_dimensions) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"neg": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16)),
      {file, "'neg'", "negative"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"frac": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4)),
      {file, "'frac'", "integer"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(R"({"big": {"dtype": "F32", "shape": [4611686018427387904,)"
                            R"( 4611686018427387904], "data_offsets": [0, 0]}})",
                            0)),
      {file, "'big'", "too large"});
  EXPECT_CHECKPOINT_ERROR(
      parse(
          raw_safetensors(R"({"huge": {"dtype": "F32", "shape": [18446744073709551615],)"
                          R"( "data_offsets": [0, 0]}})",
                          0)),
      {file, "'huge'", "too large"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"s": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16)),
      {file, "'s'", "shape"});
}

TEST(safetensors_header, rejects_offsets_outside_the_data_section) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [4, 20]}})", 16)),
      {file, "'w'", "past the end of the data section"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 16)),
      {file, "'w'", "begin after"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 16)),
      {file, "'w'", "two offsets"});
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 16)),
      {file, "'w'", "negative"});
}

TEST(safetensors_header, rejects_byte_count_that_disagrees_with_the_shape) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F16", "shape": [3], "data_offsets": [0, 12]}})", 12)),
      {file, "'w'", "hold 12 bytes", "needs 6"});
}

TEST(safetensors_header, rejects_overlapping_tensors_naming_both) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"first": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
          R"( "second": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
          16)),
      {file, "'first'", "'second'", "overlaps"});
}

TEST(safetensors_header, rejects_duplicate_tensor_names) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
          R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
          8)),
      {file, "'w'", "twice"});
}

TEST(safetensors_header, rejects_bad_metadata) {
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors(R"({"__metadata__": [1]})", 0)),
                          {file, "__metadata__"});
  EXPECT_CHECKPOINT_ERROR(parse(raw_safetensors(R"({"__metadata__": {"n": 1}})", 0)),
                          {file, "__metadata__", "'n'"});
}

TEST(safetensors_header, rejects_empty_tensor_name) {
  EXPECT_CHECKPOINT_ERROR(
      parse(raw_safetensors(
          R"({"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4)),
      {file, "empty name"});
}

TEST(safetensors_header, clips_and_escapes_hostile_names_in_messages) {
  try {
    parse(raw_safetensors(
        "{\"" + std::string("evil\\n") + std::string(1000, 'x') +
            R"(": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}})",
        1));
    ADD_FAILURE() << "expected checkpoint_error";
  } catch (const checkpoint_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("evil\\x0a"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_LT(message.size(), 400u);
  }
}

} // namespace
