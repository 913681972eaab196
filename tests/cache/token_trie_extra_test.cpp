// Extras kept beside rows (token_trie::attach_extra): charged to the log-prob budget
// with their row, dropped with it, never kept for a row the node no longer holds.
#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t vocab = 4;
constexpr std::size_t row_bytes = vocab * 4; // float32 rows

class test_extra final : public row_extra {
public:
  explicit test_extra(std::size_t bytes) : bytes_(bytes) {}
  std::size_t bytes() const override { return bytes_; }

private:
  std::size_t bytes_;
};

row_extra_ptr extra_of(std::size_t bytes) {
  return std::make_shared<test_extra>(bytes);
}

row_ptr make_row() {
  const std::vector<float> values(vocab, -1.0f);
  return logprob_row::encode(values.data(), vocab, row_dtype::float32);
}

trie_config budget_of(std::size_t bytes, std::size_t max_entries = 0) {
  trie_config c;
  c.logprob_budget_bytes = bytes;
  c.logprob_max_entries = max_entries;
  return c;
}

struct stored {
  node_id node;
  row_ptr row;
};

stored put_row(token_trie& t, const token_seq& s) {
  stored out{t.insert(s.data(), s.size()), make_row()};
  EXPECT_TRUE(t.attach_logprobs(out.node, out.row));
  return out;
}

match_result match(token_trie& t, const token_seq& s) {
  return t.match(s.data(), s.size());
}

TEST(token_trie_extra, is_kept_beside_its_row_and_charged_with_it) {
  token_trie t(budget_of(3 * row_bytes));
  const auto a = put_row(t, {1, 2});
  const auto extra = extra_of(8);
  EXPECT_TRUE(t.attach_extra(a.node, a.row, extra));
  EXPECT_EQ(t.extra(a.node), extra);
  EXPECT_EQ(match(t, {1, 2}).extra, extra);
  EXPECT_EQ(match(t, {1}).extra, nullptr); // only for the whole sequence
  EXPECT_EQ(t.stats().logprob_bytes, row_bytes + 8);
  EXPECT_EQ(t.stats().logprob_entries, 1u);
  EXPECT_EQ(t.stats().row_extras, 1u);
  t.check_invariants();
}

TEST(token_trie_extra, is_refused_for_another_row_a_second_time_or_no_row) {
  token_trie t(budget_of(3 * row_bytes));
  const auto a = put_row(t, {1});
  EXPECT_FALSE(t.attach_extra(a.node, make_row(), extra_of(8))); // not the row held
  EXPECT_TRUE(t.attach_extra(a.node, a.row, extra_of(8)));
  EXPECT_FALSE(t.attach_extra(a.node, a.row, extra_of(4))); // the first one stays
  EXPECT_EQ(t.extra(a.node)->bytes(), 8u);
  const token_seq bare{2};
  const auto node = t.insert(bare.data(), bare.size());
  EXPECT_FALSE(t.attach_extra(node, a.row, extra_of(8))); // holds no row
  EXPECT_EQ(t.stats().logprob_bytes, row_bytes + 8);
  EXPECT_THROW(t.attach_extra(a.node, a.row, nullptr), std::invalid_argument);
  t.check_invariants();
}

TEST(token_trie_extra, evicting_a_row_drops_its_extra_and_its_bytes) {
  token_trie t(budget_of(2 * row_bytes + 8));
  const auto a = put_row(t, {1});
  ASSERT_TRUE(t.attach_extra(a.node, a.row, extra_of(8)));
  put_row(t, {2});
  put_row(t, {3}); // evicts {1}, the least recently used, with its extra
  EXPECT_EQ(match(t, {1}).logprobs, nullptr);
  EXPECT_EQ(t.stats().row_extras, 0u);
  EXPECT_EQ(t.stats().logprob_bytes, 2 * row_bytes);
  t.check_invariants();
  // A node made again for {1} holds neither: the extra cannot come back for the row.
  const auto again = put_row(t, {1});
  EXPECT_EQ(t.extra(again.node), nullptr);
  EXPECT_FALSE(t.attach_extra(again.node, a.row, extra_of(8)));
}

TEST(token_trie_extra, makes_room_by_evicting_other_rows_never_its_own_path) {
  token_trie t(budget_of(3 * row_bytes));
  const auto other = put_row(t, {5});
  const auto parent = put_row(t, {1});
  const auto child = put_row(t, {1, 2});
  // Room for the extra means evicting a row: {5}'s, not the path {1}, {1, 2}.
  EXPECT_TRUE(t.attach_extra(child.node, child.row, extra_of(row_bytes)));
  EXPECT_EQ(match(t, {5}).logprobs, nullptr);
  EXPECT_EQ(t.logprobs(parent.node), parent.row);
  EXPECT_EQ(t.stats().logprob_evictions, 1u);
  t.check_invariants();
  (void)other;
}

TEST(token_trie_extra, that_cannot_fit_is_refused_without_evicting) {
  token_trie t(budget_of(3 * row_bytes));
  put_row(t, {5});
  const auto a = put_row(t, {1});
  EXPECT_FALSE(t.attach_extra(a.node, a.row, extra_of(2 * row_bytes + 1)));
  EXPECT_NE(match(t, {5}).logprobs, nullptr);
  EXPECT_EQ(t.stats().logprob_evictions, 0u);
  EXPECT_EQ(t.stats().refused_attaches, 1u);
  EXPECT_EQ(t.logprobs(a.node), a.row);
  t.check_invariants();
}

TEST(token_trie_extra, is_no_entry_of_the_entry_limit) {
  token_trie t(budget_of(10 * row_bytes, 2));
  const auto a = put_row(t, {1});
  put_row(t, {2});
  EXPECT_TRUE(t.attach_extra(a.node, a.row, extra_of(8)));
  EXPECT_NE(match(t, {2}).logprobs, nullptr); // nothing was evicted for it
  EXPECT_EQ(t.stats().logprob_entries, 2u);
  t.check_invariants();
}

TEST(token_trie_extra, on_a_locked_node_is_kept_by_its_lock) {
  token_trie t(budget_of(2 * row_bytes + 8));
  const auto a = put_row(t, {1});
  t.lock(a.node);
  ASSERT_TRUE(t.attach_extra(a.node, a.row, extra_of(row_bytes + 8)));
  // The locked row and its extra fill the budget: another row is refused at once (had
  // the lock not counted the extra, eviction would have looked for a candidate).
  const token_seq other{2};
  EXPECT_FALSE(t.attach_logprobs(t.insert(other.data(), other.size()), make_row()));
  EXPECT_EQ(t.extra(a.node)->bytes(), row_bytes + 8);
  t.check_invariants();
  t.unlock(a.node);
  t.clear();
  EXPECT_EQ(t.stats().logprob_bytes, 0u);
  EXPECT_EQ(t.stats().row_extras, 0u);
  t.check_invariants();
}

TEST(token_trie_extra, find_locates_a_sequence_without_refreshing_it) {
  token_trie t(budget_of(2 * row_bytes));
  const auto old = put_row(t, {1});
  put_row(t, {2});
  const token_seq s{1};
  EXPECT_EQ(t.find("", s.data(), s.size()), old.node);
  const token_seq missing{1, 7};
  EXPECT_EQ(t.find("", missing.data(), missing.size()), no_node);
  EXPECT_EQ(t.find("tenant", s.data(), s.size()), no_node);
  put_row(t, {3}); // {1} is still the least recently used: find did not refresh it
  EXPECT_EQ(match(t, {1}).logprobs, nullptr);
  EXPECT_NE(match(t, {2}).logprobs, nullptr);
}

} // namespace
} // namespace canopy::cache
