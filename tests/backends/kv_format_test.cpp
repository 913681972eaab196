// The KV formats (kv_format.hpp) one by one: what they store and read back, that the
// direct forward's row writes store what ATen's writes store, their bytes, and the
// zero rows padded attention reads.
#include "kv/kv_format.hpp"
#include "kv/kv_storage.hpp"

#include <canopy/backends/models/torch_backend.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

using namespace canopy::backends;

constexpr std::int64_t rows = 9, kv_heads = 3,
                       head_dim = 20; // 20: vector steps and a tail

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
  return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(),
                                               static_cast<std::size_t>(a.nbytes())) == 0;
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
  const std::uint64_t expected = GetParam() == "float32" ? 4 * head_dim
                                 : GetParam() == "int8"  ? head_dim + 4
                                                         : 2 * head_dim;
  EXPECT_EQ(format->bytes_per_head(head_dim), expected);
  auto plane = format->allocate(rows, kv_heads, head_dim, at::kCPU);
  EXPECT_EQ(
      static_cast<std::uint64_t>(plane.elements.nbytes()) +
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

INSTANTIATE_TEST_SUITE_P(formats, kv_format_each, ::testing::ValuesIn(kv_dtype_names()),
                         [](const auto& info) { return info.param; });

TEST(kv_format, the_compute_dtype_is_the_default_and_unknown_names_are_refused) {
  EXPECT_EQ(make_kv_format("", at::kBFloat16)->name(), "bfloat16");
  EXPECT_EQ(make_kv_format("", at::kFloat)->name(), "float32");
  try {
    make_kv_format("int4", at::kFloat);
    ADD_FAILURE() << "int4 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("unknown kv_dtype 'int4' (known: float32, float16, "
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

/// An int8 storage of one layer with `residual` copies, whose slot s holds s + 1 in
/// every element of K (and -(s + 1) in V) as written; int8 reads such a value back
/// exactly only when it is a multiple of its own scale, so values are off by a little
/// when read from the format and exact from a copy.
class residual_storage {
public:
  explicit residual_storage(std::int64_t residual)
      : storage(make_kv_format("int8", at::kFloat), at::kFloat, 1, rows, kv_heads,
                head_dim, at::kCPU, residual) {}

  /// Stores slots in one pass, through write() (ATen) or write_row() (the direct
  /// forward).
  void store(const std::vector<std::int64_t>& slots, bool by_row) {
    written.insert(written.end(), slots.begin(), slots.end());
    storage.begin_pass(slots);
    auto k = at::empty({static_cast<std::int64_t>(slots.size()), kv_heads, head_dim});
    for (std::size_t i = 0; i < slots.size(); ++i)
      k[static_cast<std::int64_t>(i)].fill_(value_of(slots[i]));
    // Elements of one head differ so that int8 must round: x * (1 + d / 1000).
    k = k * (1 + at::arange(head_dim, at::kFloat) / 1000);
    const auto v = -k;
    if (by_row) {
      for (std::size_t i = 0; i < slots.size(); ++i)
        storage.write_row(0, slots[i],
                          k[static_cast<std::int64_t>(i)].contiguous().data_ptr<float>(),
                          v[static_cast<std::int64_t>(i)].contiguous().data_ptr<float>());
    } else {
      storage.write(0, at::tensor(slots, at::kLong), k, v);
    }
  }
  /// The slots stored so far that read back exactly (from copies), by gather and by
  /// the loops' reader, which must agree.
  std::vector<std::int64_t> exact_slots() const {
    std::vector<std::int64_t> slots = written;
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    const auto index = at::tensor(slots, at::kLong);
    const auto [k, v] = storage.layer(0).gather(index);
    std::vector<std::int64_t> exact;
    std::vector<float> head(slots.size() * head_dim);
    storage.layer(0).read_head(true, slots.data(),
                               static_cast<std::int64_t>(slots.size()), 1, head.data());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto row = k[static_cast<std::int64_t>(i)][1];
      const auto want =
          value_of(slots[i]) * (1 + at::arange(head_dim, at::kFloat) / 1000);
      const bool is_exact = at::equal(row, want);
      EXPECT_TRUE(at::equal(v[static_cast<std::int64_t>(i)][1], -row)) << slots[i];
      EXPECT_TRUE(
          std::equal(head.begin() + static_cast<std::ptrdiff_t>(i * head_dim),
                     head.begin() + static_cast<std::ptrdiff_t>((i + 1) * head_dim),
                     row.data_ptr<float>()))
          << "slot " << slots[i] << ": the loops read what the gather reads";
      EXPECT_LE((row - want).abs().max().item<float>(),
                want.abs().max().item<float>() / 254 * 1.0001)
          << "slot " << slots[i] << " reads its own token, within int8's step";
      if (is_exact)
        exact.push_back(slots[i]);
    }
    return exact;
  }
  kv_storage storage;

private:
  std::vector<std::int64_t> written;
  static float value_of(std::int64_t slot) { return static_cast<float>(slot + 1); }
};

TEST(kv_residual, the_newest_stored_tokens_read_exactly_and_the_oldest_copy_goes_first) {
  for (const bool by_row : {false, true}) {
    residual_storage s(3);
    s.store({0, 1, 2, 3, 4}, by_row);
    EXPECT_EQ(s.exact_slots(), (std::vector<std::int64_t>{2, 3, 4})) << by_row;
    s.store({5}, by_row);
    EXPECT_EQ(s.exact_slots(), (std::vector<std::int64_t>{3, 4, 5})) << by_row;
    // Slot 4 released and reused for another token: its old copy must not be read.
    s.store({4, 6}, by_row);
    EXPECT_EQ(s.exact_slots(), (std::vector<std::int64_t>{4, 5, 6})) << by_row;
    s.store({7, 8, 0, 1}, by_row);
    EXPECT_EQ(s.exact_slots(), (std::vector<std::int64_t>{0, 1, 8})) << by_row;
  }
}

TEST(kv_residual, a_packed_pass_reads_its_newest_new_kv_exactly) {
  residual_storage s(2);
  const auto x = some_kv(4);
  const auto stored = s.storage.as_stored(x);
  EXPECT_TRUE(at::equal(stored.narrow(0, rows - 2, 2), x.narrow(0, rows - 2, 2)));
  EXPECT_FALSE(at::equal(stored.narrow(0, 0, rows - 2), x.narrow(0, 0, rows - 2)))
      << "older new tokens read as int8 stores them";
}

} // namespace
