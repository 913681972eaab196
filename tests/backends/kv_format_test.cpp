// The KV formats (kv_format.hpp) one by one: what they store and read back, that the
// direct forward's row writes store what ATen's writes store, their bytes, and the
// zero rows padded attention reads.
#include "kv_format.hpp"
#include "kv_storage.hpp"

#include <canopy/backends/torch_backend.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

using namespace canopy::backends;

constexpr std::int64_t rows = 9, kv_heads = 3, head_dim = 20; // 20: vector steps and a tail

/// Random KV with heads of very different sizes (and one head of zeros), so a scale
/// per token and head matters.
at::Tensor some_kv(std::uint64_t seed) {
  at::manual_seed(seed);
  auto x = at::randn({rows, kv_heads, head_dim}) *
           at::tensor({0.01f, 1.0f, 40.0f}).view({1, kv_heads, 1});
  x[4][1].zero_();
  return x;
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined())
    return a.defined() == b.defined();
  return a.sizes() == b.sizes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<std::size_t>(a.nbytes())) == 0;
}

class kv_format_each : public ::testing::TestWithParam<std::string> {
protected:
  std::unique_ptr<kv_format> format = make_kv_format(GetParam(), at::kFloat);
};

TEST_P(kv_format_each, row_writes_store_the_same_bytes_as_tensor_writes) {
  const auto x = some_kv(1);
  const auto all = at::arange(rows, at::kLong);
  auto by_tensor = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  auto by_row = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  format->write(by_tensor, all, x);
  for (std::int64_t r = 0; r < rows; ++r)
    format->write_row(by_row, r, x[r].contiguous().data_ptr<float>());
  EXPECT_TRUE(same_bytes(by_tensor.elements, by_row.elements));
  EXPECT_TRUE(same_bytes(by_tensor.scales, by_row.scales));
}

TEST_P(kv_format_each, reads_back_within_the_formats_rounding_and_the_same_both_ways) {
  const auto x = some_kv(2);
  const auto all = at::arange(rows, at::kLong);
  auto plane = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  format->write(plane, all, x);
  const auto back = format->gather(plane, all, at::kFloat);
  // Per element, the most a correct conversion may move it: half a unit in the last
  // place (float16: 11 significant bits, bfloat16: 8), int8: half a step of its
  // head's scale, max|head| / 127.
  at::Tensor bound;
  if (GetParam() == "float32")
    bound = at::zeros_like(x);
  else if (GetParam() == "float16")
    bound = x.abs() * std::ldexp(1.0, -11) + 6e-8; // + half float16's smallest step
  else if (GetParam() == "bfloat16")
    bound = x.abs() * std::ldexp(1.0, -8);
  else
    bound = x.abs().amax(-1, true) / 254.0 * (1 + 1e-6) + at::zeros_like(x);
  EXPECT_TRUE(((back - x).abs() <= bound).all().item<bool>())
    << "largest excess " << ((back - x).abs() - bound).max().item<float>();
  EXPECT_TRUE((back[4][1] == 0).all().item<bool>()) << "a head of zeros reads back zeros";
  // The loops' reader gives the same floats as the gather.
  const std::int64_t some_rows[] = {7, 0, 4};
  std::vector<float> read(3 * head_dim);
  for (std::int64_t head = 0; head < kv_heads; ++head) {
    format->read_head(plane, some_rows, 3, head, read.data());
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t d = 0; d < head_dim; ++d)
        ASSERT_EQ(read[static_cast<std::size_t>(i * head_dim + d)],
                  back[some_rows[i]][head][d].item<float>())
          << "row " << some_rows[i] << " head " << head << " element " << d;
  }
  EXPECT_EQ(format->in_place(plane) != nullptr, GetParam() == "float32");
}

TEST_P(kv_format_each, counts_its_bytes_and_zeroes_the_padding_row) {
  const std::uint64_t expected = GetParam() == "float32"  ? 4 * head_dim
                                 : GetParam() == "int8"   ? head_dim + 4
                                                          : 2 * head_dim;
  EXPECT_EQ(format->bytes_per_head(head_dim), expected);
  auto plane = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  EXPECT_EQ(static_cast<std::uint64_t>(plane.elements.nbytes()) +
              static_cast<std::uint64_t>(plane.scales.defined() ? plane.scales.nbytes() : 0),
            static_cast<std::uint64_t>(rows * kv_heads) * expected)
    << "the budget counts what is allocated";
  const kv_storage storage(make_kv_format(GetParam(), at::kFloat), at::kFloat, 2, rows,
                           kv_heads, head_dim, at::kCPU);
  const auto zero = at::full({1}, storage.zero_row(), at::kLong);
  for (std::int64_t layer = 0; layer < 2; ++layer) {
    const auto [k, v] = storage.layer(layer).gather(zero);
    EXPECT_TRUE((k == 0).all().item<bool>() && (v == 0).all().item<bool>()) << layer;
  }
}

TEST_P(kv_format_each, a_packed_pass_reads_its_new_kv_as_stored) {
  const kv_storage storage(make_kv_format(GetParam(), at::kFloat), at::kFloat, 1, rows,
                           kv_heads, head_dim, at::kCPU);
  const auto x = some_kv(3);
  auto plane = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  const auto all = at::arange(rows, at::kLong);
  format->write(plane, all, x);
  EXPECT_TRUE(same_bytes(storage.as_stored(x), format->gather(plane, all, at::kFloat)));
}

INSTANTIATE_TEST_SUITE_P(formats, kv_format_each,
                         ::testing::ValuesIn(kv_dtype_names()),
                         [](const auto& info) { return info.param; });

TEST(kv_format, the_compute_dtype_is_the_default_and_unknown_names_are_refused) {
  EXPECT_EQ(make_kv_format("", at::kBFloat16)->name(), "bfloat16");
  EXPECT_EQ(make_kv_format("", at::kFloat)->name(), "float32");
  try {
    make_kv_format("int4", at::kFloat);
    ADD_FAILURE() << "int4 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown kv_dtype 'int4' (known: float32, float16, "
                                         "bfloat16, int8"),
              std::string::npos)
      << e.what();
  }
}

TEST(kv_format, storage_costs_precision_only_when_it_keeps_fewer_bits_than_the_compute) {
  torch_options options;
  EXPECT_EQ(kv_storage_roundoff(options), 0.0) << "the default stores the compute dtype";
  options.kv_dtype = "float16";
  EXPECT_EQ(kv_storage_roundoff(options), std::ldexp(1.0, -11));
  options.kv_dtype = "int8";
  EXPECT_EQ(kv_storage_roundoff(options), 1.0 / 254);
  options.dtype = "bfloat16";
  options.kv_dtype = "float32";
  EXPECT_EQ(kv_storage_roundoff(options), 0.0) << "wider storage than the compute";
  options.kv_dtype = "float16";
  EXPECT_EQ(kv_storage_roundoff(options), 0.0) << "float16 keeps more bits than bfloat16";
}

} // namespace
