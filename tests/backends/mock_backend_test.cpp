#include <canopy/backends/backend_factory.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;
using canopy::cache::token_seq;

mock_options small_options() {
  mock_options options;
  options.vocab_size = 64;
  options.context_length = 16;
  return options;
}

pass_item make_item(token_seq tokens, std::vector<std::uint32_t> rows,
                    kv_handle prefix = no_kv, std::uint32_t prefix_length = 0,
                    bool keep_kv = true) {
  pass_item item;
  item.prefix = prefix;
  item.prefix_length = prefix_length;
  item.tokens = std::move(tokens);
  item.rows = std::move(rows);
  item.keep_kv = keep_kv;
  return item;
}

item_output run_one(backend_i& backend, pass_item item) {
  pass_request request;
  request.items.push_back(std::move(item));
  pass_result result = backend.run(request);
  return std::move(result.items.at(0));
}

std::vector<float> row_of(const item_output& out, std::size_t row, std::int64_t vocab) {
  const auto begin = out.logprobs.begin() + static_cast<std::ptrdiff_t>(row * vocab);
  return {begin, begin + vocab};
}

std::vector<float> expected(const mock_options& options, const token_seq& tokens) {
  return mock_logprobs(options, tokens.data(), tokens.size());
}

double logsumexp(const std::vector<float>& row) {
  const double top = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (const float x : row)
    sum += std::exp(x - top);
  return top + std::log(sum);
}

// Runs `request`, expecting an `Error` whose message holds every fragment, and no KV
// entries made by the failed pass.
template <class Error>
void expect_pass_error(backend_i& backend, const pass_request& request,
                       const std::vector<std::string>& fragments) {
  const std::size_t before = backend.kv_entries();
  try {
    backend.run(request);
    ADD_FAILURE() << "the pass did not fail";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' missing from: " << message;
  }
  EXPECT_EQ(backend.kv_entries(), before);
}

TEST(mock_logprobs, rows_are_distributions) {
  for (const std::int64_t vocab : {2, 64, 512, 50257}) {
    mock_options options;
    options.vocab_size = vocab;
    for (const token_seq& tokens : {token_seq{}, token_seq{0}, token_seq{1, 0, 1}}) {
      const auto row = expected(options, tokens);
      ASSERT_EQ(row.size(), static_cast<std::size_t>(vocab));
      for (const float x : row)
        ASSERT_TRUE(std::isfinite(x) && x <= 0.0f) << x;
      EXPECT_NEAR(logsumexp(row), 0.0, 1e-5) << "vocab " << vocab;
    }
  }
}

TEST(mock_logprobs, is_deterministic_and_sequence_specific) {
  const mock_options options;
  EXPECT_EQ(expected(options, {3, 1, 4}), expected(options, {3, 1, 4}));
  EXPECT_NE(expected(options, {2}), expected(options, {0, 1}));
  EXPECT_NE(expected(options, {}), expected(options, {0}));
  EXPECT_NE(expected(options, {0}), expected(options, {0, 0}));
  EXPECT_NE(expected(options, {1, 2}), expected(options, {2, 1}));
  mock_options reseeded = options;
  reseeded.seed = options.seed + 1;
  EXPECT_NE(expected(options, {3, 1, 4}), expected(reseeded, {3, 1, 4}));
}

TEST(mock_logprobs, rows_are_peaked_enough_to_sample_from) {
  // A flat row would make sampling tests unable to tell distributions apart.
  const mock_options options; // vocab 512
  for (int t = 0; t < 20; ++t) {
    const auto row = expected(options, {t});
    const double top = std::exp(*std::max_element(row.begin(), row.end()));
    EXPECT_GT(top, 10.0 / 512) << "sequence [" << t << "]";
  }
}

TEST(mock_backend, info_reflects_options) {
  mock_options options = small_options();
  options.kv_bytes_per_token = 123;
  const auto backend = make_mock_backend(options);
  EXPECT_EQ(backend->info().name, "mock");
  EXPECT_EQ(backend->info().vocab_size, 64);
  EXPECT_EQ(backend->info().context_length, 16);
  EXPECT_EQ(backend->info().kv_bytes_per_token, 123u);
  EXPECT_EQ(backend->kv_entries(), 0u);
}

TEST(mock_backend, rows_at_several_positions_match_mock_logprobs) {
  const mock_options options = small_options();
  const auto backend = make_mock_backend(options);
  const token_seq tokens{5, 9, 2, 7, 7};
  const auto out = run_one(*backend, make_item(tokens, {0, 2, 4}));
  ASSERT_EQ(out.logprobs.size(), 3u * 64);
  const std::uint32_t rows[] = {0, 2, 4};
  for (std::size_t r = 0; r < 3; ++r) {
    const token_seq prefix(tokens.begin(), tokens.begin() + rows[r] + 1);
    EXPECT_EQ(row_of(out, r, 64), expected(options, prefix)) << "row " << rows[r];
  }
  EXPECT_EQ(out.kv.size(), tokens.size());
}

TEST(mock_backend, kv_path_equals_one_shot_path_bit_for_bit) {
  const mock_options options = small_options();
  const token_seq abc{11, 42, 3};

  const auto one_shot = make_mock_backend(options);
  const auto whole = run_one(*one_shot, make_item(abc, {2}));

  const auto split = make_mock_backend(options);
  const auto first = run_one(*split, make_item({11}, {}));
  const auto rest = run_one(*split, make_item({42, 3}, {1}, first.kv.at(0), 1));

  const auto stepwise = make_mock_backend(options);
  const auto s1 = run_one(*stepwise, make_item({11}, {0}));
  const auto s2 = run_one(*stepwise, make_item({42}, {0}, s1.kv.at(0), 1));
  const auto s3 = run_one(*stepwise, make_item({3}, {0}, s2.kv.at(0), 2));

  EXPECT_EQ(whole.logprobs, expected(options, abc));
  EXPECT_EQ(rest.logprobs, whole.logprobs);
  EXPECT_EQ(s3.logprobs, whole.logprobs);
  EXPECT_EQ(s1.logprobs, expected(options, {11}));
  EXPECT_EQ(s2.logprobs, expected(options, {11, 42}));
}

TEST(mock_backend, kv_entry_carries_its_prefix) {
  // Continuing the same token from two different prefixes must differ, so a cache
  // that hands over the wrong handle is caught by a wrong row.
  const mock_options options = small_options();
  const auto backend = make_mock_backend(options);
  const auto a = run_one(*backend, make_item({1}, {}));
  const auto b = run_one(*backend, make_item({2}, {}));
  const auto after_a = run_one(*backend, make_item({9}, {0}, a.kv.at(0), 1));
  const auto after_b = run_one(*backend, make_item({9}, {0}, b.kv.at(0), 1));
  EXPECT_NE(after_a.logprobs, after_b.logprobs);
  EXPECT_EQ(after_b.logprobs, expected(options, {2, 9}));
}

TEST(mock_backend, under_a_window_a_pass_needs_the_prefixs_last_w_minus_one_kv_only) {
  // W = 4: continuing 6 tokens reads the KV of tokens 4-6. Releasing token 3's is
  // harmless; releasing token 4's fails the pass, as a windowed model's would.
  mock_options options = small_options();
  options.kv_window = 4;
  const auto backend = make_mock_backend(options);
  const auto six = run_one(*backend, make_item({1, 2, 3, 4, 5, 6}, {}));
  backend->release_kv({six.kv.at(2)});
  const auto seventh = run_one(*backend, make_item({7}, {0}, six.kv.at(5), 6));
  EXPECT_EQ(seventh.logprobs, expected(options, {1, 2, 3, 4, 5, 6, 7}));
  backend->release_kv({six.kv.at(3)});
  EXPECT_THROW(run_one(*backend, make_item({7}, {0}, six.kv.at(5), 6)),
               std::runtime_error);
}

TEST(mock_backend, ragged_pass_equals_items_run_alone) {
  const mock_options options = small_options();
  const auto together = make_mock_backend(options);
  const auto alone = make_mock_backend(options);
  const kv_handle prefix = run_one(*together, make_item({4, 4}, {})).kv.at(1);
  ASSERT_EQ(run_one(*alone, make_item({4, 4}, {})).kv.at(1), prefix);

  const std::vector<pass_item> items{
      make_item({8, 1, 6}, {0, 2}, prefix, 2), make_item({63}, {0}),
      make_item({0, 0, 0, 0}, {3}, no_kv, 0, false), make_item({5}, {}, prefix, 2)};
  pass_request request;
  request.items = items;
  const pass_result result = together->run(request);
  ASSERT_EQ(result.items.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto single = run_one(*alone, items[i]);
    EXPECT_EQ(result.items[i].logprobs, single.logprobs) << "item " << i;
    EXPECT_EQ(result.items[i].kv.size(), single.kv.size()) << "item " << i;
  }
  EXPECT_EQ(result.items[0].logprobs.size(), 2u * 64);
  EXPECT_EQ(row_of(result.items[0], 1, 64), expected(options, {4, 4, 8, 1, 6}));
  EXPECT_EQ(together->kv_entries(), alone->kv_entries());
}

TEST(mock_backend, tokens_computed_counts_exactly_the_new_tokens) {
  const auto backend = make_mock_backend(small_options());
  const kv_handle prefix = run_one(*backend, make_item({1, 2, 3}, {})).kv.at(2);
  pass_request request;
  request.items = {make_item({4, 5}, {1}, prefix, 3), make_item({1}, {}),
                   make_item({6, 6, 6, 6, 6}, {0, 4}, no_kv, 0, false)};
  EXPECT_EQ(backend->run(request).tokens_computed, 2u + 1 + 5);
}

TEST(mock_backend, handles_are_non_zero_increasing_and_never_reused) {
  const auto backend = make_mock_backend(small_options());
  const auto first = run_one(*backend, make_item({1, 2, 3}, {}));
  ASSERT_EQ(first.kv.size(), 3u);
  EXPECT_NE(first.kv[0], no_kv);
  EXPECT_TRUE(std::is_sorted(first.kv.begin(), first.kv.end()));
  EXPECT_EQ(std::adjacent_find(first.kv.begin(), first.kv.end()), first.kv.end());
  backend->release_kv(first.kv);
  const auto second = run_one(*backend, make_item({1, 2, 3}, {}));
  for (const kv_handle handle : second.kv)
    EXPECT_GT(handle, first.kv.back());
}

TEST(mock_backend, keep_kv_false_leaves_no_entries) {
  const mock_options options = small_options();
  const auto backend = make_mock_backend(options);
  const auto out = run_one(*backend, make_item({7, 8, 9}, {2}, no_kv, 0, false));
  EXPECT_TRUE(out.kv.empty());
  EXPECT_EQ(backend->kv_entries(), 0u);
  EXPECT_EQ(out.logprobs, expected(options, {7, 8, 9}));
}

TEST(mock_backend, release_kv_frees_entries_and_a_released_handle_fails_a_pass) {
  const auto backend = make_mock_backend(small_options());
  const auto out = run_one(*backend, make_item({1, 2, 3}, {}));
  ASSERT_EQ(backend->kv_entries(), 3u);
  backend->release_kv({out.kv[2], 987654}); // unknown handles are ignored
  EXPECT_EQ(backend->kv_entries(), 2u);
  pass_request request;
  request.items = {make_item({4}, {0}, out.kv[2], 3)};
  expect_pass_error<std::runtime_error>(*backend, request,
                                        {"item 0", std::to_string(out.kv[2])});
  // The surviving prefix still works.
  EXPECT_EQ(run_one(*backend, make_item({4}, {}, out.kv[1], 2)).kv.size(), 1u);
}

TEST(mock_backend, invalid_items_fail_the_whole_pass_and_make_no_kv) {
  const auto backend = make_mock_backend(small_options());
  const kv_handle prefix = run_one(*backend, make_item({1, 2}, {})).kv.at(1);
  // Item 0 is valid each time: the failure must name item 1 and keep item 0's KV out.
  const pass_item valid = make_item({3, 4}, {1});
  const auto with_bad = [&](pass_item bad) {
    pass_request request;
    request.items = {valid, std::move(bad)};
    return request;
  };
  using invalid = std::invalid_argument;
  expect_pass_error<invalid>(*backend, with_bad(make_item({}, {})),
                             {"item 1", "no tokens"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({1, 64}, {})),
                             {"item 1", "64"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({-1}, {})), {"item 1", "-1"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({1, 2, 3}, {2, 1})),
                             {"item 1", "ascending"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({1, 2, 3}, {1, 1})),
                             {"item 1", "ascending"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({1, 2, 3}, {3})),
                             {"item 1", "row 3"});
  expect_pass_error<invalid>(*backend, with_bad(make_item({1}, {}, no_kv, 2)),
                             {"item 1", "prefix_length 2"});
  expect_pass_error<invalid>(*backend, with_bad(make_item(token_seq(17, 1), {})),
                             {"item 1", "context length 16"});
  expect_pass_error<invalid>(*backend,
                             with_bad(make_item(token_seq(15, 1), {}, prefix, 2)),
                             {"item 1", "context length 16"});
  expect_pass_error<std::runtime_error>(*backend, with_bad(make_item({1}, {}, 4242, 2)),
                                        {"item 1", "4242"});
  expect_pass_error<std::runtime_error>(*backend, with_bad(make_item({1}, {}, prefix, 1)),
                                        {"item 1", "prefix_length 1"});
  EXPECT_EQ(backend->kv_entries(), 2u);
  // At the context length exactly is allowed.
  EXPECT_EQ(run_one(*backend, make_item(token_seq(14, 1), {}, prefix, 2)).kv.size(), 14u);
}

TEST(mock_backend, an_adapter_has_rows_of_its_own_and_its_kv_is_never_read_by_another) {
  const auto options = small_options();
  auto backend = make_mock_backend(options);
  const lora_adapter_files files{"a-dir", "{}", "weights of a"};
  backend->add_adapter("a", files);
  const token_seq tokens{3, 1, 4, 1};
  auto adapted = make_item(tokens, {3});
  adapted.adapter = "a";
  const auto out = run_one(*backend, adapted);
  const auto want = expected(mock_adapted(options, files), tokens);
  EXPECT_EQ(row_of(out, 0, options.vocab_size), want);
  EXPECT_NE(want, expected(options, tokens));
  auto other_files = files;
  other_files.weights.back() = 'b';
  EXPECT_NE(expected(mock_adapted(options, other_files), tokens), want)
      << "one byte of the weights makes another adapter";

  // The adapted KV continues under the adapter, bit for bit, and under nothing else.
  auto base_next = make_item({5}, {0}, out.kv.back(), 4);
  EXPECT_THROW(run_one(*backend, base_next), std::runtime_error);
  auto adapted_next = base_next;
  adapted_next.adapter = "a";
  token_seq longer = tokens;
  longer.push_back(5);
  EXPECT_EQ(row_of(run_one(*backend, adapted_next), 0, options.vocab_size),
            expected(mock_adapted(options, files), longer));

  EXPECT_THROW(backend->add_adapter("a", files), std::invalid_argument);
  EXPECT_TRUE(backend->remove_adapter("a"));
  EXPECT_THROW(run_one(*backend, adapted), std::invalid_argument);
}

TEST(mock_backend, simulated_cost_is_spent_per_pass_and_per_token) {
  mock_options options = small_options();
  options.cost_per_token = std::chrono::milliseconds(2);
  const auto backend = make_mock_backend(options);
  const auto started = std::chrono::steady_clock::now();
  run_one(*backend, make_item({1, 2, 3, 4, 5}, {4}));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(10));

  options.cost_per_token = {};
  options.cost_per_pass = std::chrono::milliseconds(5);
  const auto per_pass = make_mock_backend(options);
  const auto again = std::chrono::steady_clock::now();
  run_one(*per_pass, make_item({1}, {0}));
  EXPECT_GE(std::chrono::steady_clock::now() - again, std::chrono::milliseconds(5));
}

TEST(backend_factory, makes_the_mock_from_a_spec) {
  backend_spec spec;
  spec.mock = small_options();
  const auto backend = make_backend(spec);
  EXPECT_EQ(backend->info().name, "mock");
  EXPECT_EQ(backend->info().vocab_size, 64);
  EXPECT_EQ(run_one(*backend, make_item({1, 2}, {1})).logprobs,
            expected(spec.mock, {1, 2}));
}

template <class Make> void expect_invalid(Make make, const std::string& fragment) {
  try {
    make();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
        << error.what();
  }
}

TEST(backend_factory, rejects_unknown_kinds_devices_and_bad_options) {
  backend_spec spec;
  spec.kind = "llama";
  expect_invalid([&] { return make_backend(spec); },
                 "unknown backend 'llama' (known: mock, torch)");
  spec = {};
  spec.device = "cuda:0";
  expect_invalid([&] { return make_backend(spec); }, "cuda:0");
  spec = {};
  spec.mock.vocab_size = 1;
  expect_invalid([&] { return make_backend(spec); }, "vocab_size");
  spec = {};
  spec.mock.context_length = 0;
  expect_invalid([&] { return make_backend(spec); }, "context_length");
  spec = {};
  spec.mock.cost_per_token = std::chrono::nanoseconds(-1);
  expect_invalid([&] { return make_mock_backend(spec.mock); }, "negative");
}

} // namespace
