// The host tier of the LibTorch backend (torch_options::kv_host_budget_bytes): KV that
// demote_kv moves off the device keeps its handles, and a pass that reads it moves it
// back first. In the device's format the round trip is byte for byte, so answers are
// bit for bit the same; compressed to int8 they stay within int8's bound.
#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/models/torch_backend.hpp>

#include "oracle.hpp"
#include "pass_items.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace {

using namespace canopy::backends;
using canopy::cache::token_seq;
using canopy::testing::item;

class kv_host_tier : public ::testing::Test {
protected:
  void SetUp() override {
    CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
    CANOPY_SHARED_PATH_OR_SKIP(oracle, "oracle/stories260K");
    ckpt = load_checkpoint(model);
    cases = canopy::testing::load_oracle_cases(oracle);
  }
  /// stories260K float32: 1,280 bytes a token on the device; the host holds `host`
  /// tokens' worth of bytes in its format.
  std::unique_ptr<backend_i> make(std::uint64_t device_tokens, std::uint64_t host_bytes,
                                  const std::string& host_dtype = "") const {
    torch_options options;
    options.kv_budget_bytes = device_tokens * 1280;
    options.kv_host_budget_bytes = host_bytes;
    options.kv_host_dtype = host_dtype;
    return make_torch_backend(ckpt, canopy::testing::test_device(), options);
  }
  /// Keeps the KV of tokens[0..n) and returns its handles.
  static std::vector<kv_handle> prime(backend_i& backend, const token_seq& tokens,
                                      std::size_t n) {
    pass_request request;
    request.items.push_back(
        item(token_seq(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n))));
    return backend.run(request).items[0].kv;
  }
  /// The rows after tokens[n..) continuing the KV `prefix` of tokens[0..n), kept or not.
  static std::vector<float> continue_from(backend_i& backend, const token_seq& tokens,
                                          std::size_t n, kv_handle prefix,
                                          bool keep = false) {
    pass_request request;
    request.items.push_back(
        item(token_seq(tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens.end()),
             prefix, static_cast<std::uint32_t>(n), keep));
    return backend.run(request).items[0].logprobs;
  }
  checkpoint ckpt;
  std::vector<canopy::testing::oracle_case> cases;
};

TEST_F(kv_host_tier, demoted_kv_keeps_its_handles_and_answers_bit_for_bit_the_same) {
  const auto& c = cases.back();
  const auto n = c.tokens.size() / 2;
  auto backend = make(64, 64 * 1280);
  const auto handles = prime(*backend, c.tokens, n);
  const auto before = continue_from(*backend, c.tokens, n, handles.back());
  EXPECT_EQ(backend->demote_kv(handles), n);
  EXPECT_EQ(backend->demote_kv(handles), 0u) << "already on the host";
  EXPECT_EQ(backend->kv_entries(), n) << "demoted KV is still held";
  const auto after = continue_from(*backend, c.tokens, n, handles.back());
  EXPECT_EQ(after, before) << "moved back byte for byte";
  EXPECT_LE(canopy::testing::max_abs_diff(
                after.data(), c.row(static_cast<std::int64_t>(n)), after.size()),
            c.tolerance);
  // A handle released while on the host is gone from both tiers.
  EXPECT_EQ(backend->demote_kv(handles), n) << "the pass moved them back to the device";
  backend->release_kv(handles);
  EXPECT_EQ(backend->kv_entries(), 0u);
  pass_request stale;
  stale.items.push_back(
      item({c.tokens[n]}, handles.back(), static_cast<std::uint32_t>(n)));
  EXPECT_THROW(backend->run(stale), std::invalid_argument);
}

TEST_F(kv_host_tier, the_host_holds_what_its_budget_holds_and_frees_device_rows) {
  const auto& c = cases.back(); // longer than the device's 16 rows
  ASSERT_GT(c.tokens.size(), 24u);
  auto backend = make(16, 10 * 1280); // the host: 10 tokens
  const auto first = prime(*backend, c.tokens, 12);
  EXPECT_EQ(backend->demote_kv(first), 10u) << "the host tier is full after 10";
  // The device now has room for 14 more (16 - 2 left there).
  const auto second =
      prime(*backend, token_seq(c.tokens.begin() + 12, c.tokens.end()), 14);
  for (const auto h : second)
    EXPECT_NE(h, no_kv);
  EXPECT_EQ(backend->kv_entries(), 12u + 14u);
  // Reading the host's 10 back needs 10 free device rows: there are none.
  try {
    continue_from(*backend, c.tokens, 12, first.back());
    ADD_FAILURE() << "a pass read host KV with no device row free";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no free device KV row"), std::string::npos)
        << e.what();
  }
  // It keeps serving: with room made, the same pass answers as the oracle says.
  backend->release_kv(second);
  const auto rows = continue_from(*backend, c.tokens, 12, first.back());
  EXPECT_LE(canopy::testing::max_abs_diff(rows.data(), c.row(12), rows.size()),
            c.tolerance);
}

TEST_F(kv_host_tier, an_int8_host_tier_holds_more_and_stays_within_its_bound) {
  const auto& c = cases.back();
  const auto n = c.tokens.size() / 2;
  // int8 takes 480 bytes a token (stories260K, head size 8): 5 float32 tokens' bytes
  // hold 13 of them.
  auto backend = make(64, 5 * 1280, "int8");
  const auto handles = prime(*backend, c.tokens, n);
  const auto exact = continue_from(*backend, c.tokens, n, handles.back());
  ASSERT_GE(n, 13u);
  EXPECT_EQ(backend->demote_kv(handles), 13u);
  const auto compressed = continue_from(*backend, c.tokens, n, handles.back());
  double largest = 0;
  for (std::size_t v = 0; v < exact.size(); ++v)
    largest = std::max(largest, std::abs(static_cast<double>(compressed[v]) - exact[v]));
  EXPECT_GT(largest, 0.0) << "int8 changes what comes back";
  EXPECT_LE(largest, 1.5) << "int8's bound on stories260K (kv_dtype_fidelity_test)";
}

TEST_F(kv_host_tier, without_a_host_budget_nothing_moves) {
  const auto& c = cases.front();
  auto backend = make(64, 0);
  const auto handles = prime(*backend, c.tokens, 3);
  EXPECT_EQ(backend->demote_kv(handles), 0u);
  EXPECT_EQ(backend->kv_entries(), 3u);
}

} // namespace
