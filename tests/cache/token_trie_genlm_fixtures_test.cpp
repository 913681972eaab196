// Scenarios of genlm-backend's caches (github.com/genlm/genlm-backend), translated to
// the token trie. Upstream keeps two structures: OutputCache (genlm/backend/cache.py),
// an OrderedDict of rows with `maxsize` whose lookups refresh recency and whose
// inserts drop the oldest entry when full; and TokenTrie / TokenKVTrie (same file),
// a tree of tokens holding the log-probs after each prefix and past key/values, which
// AsyncTransformer.walk_cache (genlm/backend/llm/hf.py) walks to find the deepest KV
// to resume from. Each test names the upstream test or code it comes from. Upstream
// prompts are tokenized text; the token ids here are stand-ins of similar length.

#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t vocab = 8;
constexpr std::size_t row_bytes = vocab * 4;

// A distinct row per call, so that "the same row" below means the same object.
row_ptr fresh_row() {
  static float next = -1.0f;
  next -= 0.5f;
  const std::vector<float> values(vocab, next);
  return logprob_row::encode(values.data(), vocab, row_dtype::float32);
}

// OutputCache(maxsize=n): an entry limit, and bytes that never bind.
trie_config output_cache(std::size_t maxsize) {
  trie_config c;
  c.logprob_max_entries = maxsize;
  c.logprob_budget_bytes = 1000 * row_bytes;
  c.policy = eviction_policy::lru;
  return c;
}

node_id insert(token_trie& t, const token_seq& s) {
  return t.insert(s.data(), s.size());
}

match_result walk(token_trie& t, const token_seq& s,
                  std::uint32_t kv_cap = std::numeric_limits<std::uint32_t>::max()) {
  return t.match(s.data(), s.size(), 0, kv_cap);
}

// The cache side of next_token_logprobs: a hit returns the stored row, a miss
// computes one and stores it.
struct counting_cache {
  token_trie trie;
  int misses = 0;

  explicit counting_cache(trie_config c) : trie(c) {}

  row_ptr next_token_logprobs(const token_seq& s) {
    if (row_ptr hit = walk(trie, s).logprobs)
      return hit;
    ++misses;
    row_ptr row = fresh_row();
    EXPECT_TRUE(trie.attach_logprobs(insert(trie, s), row));
    return row;
  }
};

// tests/test_cache.py::test_memory_freed_on_eviction: with maxsize=2, storing two
// entries reaches capacity, and each of four more stores keeps memory at capacity.
TEST(genlm_output_cache, memory_is_freed_on_eviction) {
  token_trie t(output_cache(2));
  for (token_id i = 0; i < 2; ++i)
    ASSERT_TRUE(t.attach_logprobs(insert(t, {i}), fresh_row()));
  const std::uint64_t at_capacity = t.stats().logprob_bytes;
  EXPECT_EQ(at_capacity, 2 * row_bytes);
  for (token_id i = 0; i < 4; ++i) {
    const token_seq extra = {100 + i};
    ASSERT_TRUE(t.attach_logprobs(insert(t, extra), fresh_row()));
    EXPECT_LE(t.stats().logprob_bytes, at_capacity);
    EXPECT_EQ(t.stats().logprob_entries, 2u);
  }
  EXPECT_EQ(t.stats().logprob_evictions, 4u);
  // popitem(last=False): what remains is exactly the two newest stores.
  for (token_id gone : {0, 1, 100, 101})
    EXPECT_EQ(walk(t, {gone}).logprobs, nullptr) << gone;
  EXPECT_NE(walk(t, {102}).logprobs, nullptr);
  EXPECT_NE(walk(t, {103}).logprobs, nullptr);
  t.check_invariants();
}

// tests/test_cache.py::test_memory_freed_on_clear.
TEST(genlm_output_cache, memory_is_freed_on_clear) {
  token_trie t(output_cache(2));
  for (token_id i = 0; i < 2; ++i)
    ASSERT_TRUE(t.attach_logprobs(insert(t, {i}), fresh_row()));
  EXPECT_GT(t.stats().logprob_bytes, 0u);
  t.clear();
  EXPECT_EQ(t.stats().logprob_bytes, 0u);
  EXPECT_EQ(t.stats().logprob_entries, 0u);
  EXPECT_EQ(t.stats().nodes, 1u);
  t.check_invariants();
}

// tests/test_llm.py::test_cache: with cache_size=2, asking for [0] and [1] stores two
// entries; asking again returns the same rows without recomputing; clear_cache
// empties the cache.
TEST(genlm_output_cache, repeated_queries_hit_and_clear_empties) {
  counting_cache cache(output_cache(2));
  const row_ptr first = cache.next_token_logprobs({0});
  const row_ptr second = cache.next_token_logprobs({1});
  EXPECT_EQ(cache.trie.stats().logprob_entries, 2u);
  EXPECT_EQ(cache.next_token_logprobs({0}), first);
  EXPECT_EQ(cache.next_token_logprobs({1}), second);
  EXPECT_EQ(cache.misses, 2);
  cache.trie.clear();
  EXPECT_EQ(cache.trie.stats().logprob_entries, 0u);
  cache.next_token_logprobs({0});
  EXPECT_EQ(cache.misses, 3);
}

// OutputCache.__getitem__ moves a hit to the end of the OrderedDict, so a lookup
// protects an entry: set a, set b, get a, set c evicts b.
TEST(genlm_output_cache, lookup_refreshes_recency) {
  counting_cache cache(output_cache(2));
  const row_ptr a = cache.next_token_logprobs({10});
  cache.next_token_logprobs({11});
  EXPECT_EQ(cache.next_token_logprobs({10}), a);
  cache.next_token_logprobs({12});
  EXPECT_EQ(cache.next_token_logprobs({10}), a);
  EXPECT_EQ(cache.misses, 3);
  cache.next_token_logprobs({11}); // was evicted: a miss
  EXPECT_EQ(cache.misses, 4);
}

// The prompts of tests/test_hf_llm.py's token_ids_list include one prompt twice
// ("Check duplicate query logic"): a duplicate is one trie entry and one computation.
TEST(genlm_token_trie, duplicate_prompts_share_one_entry) {
  counting_cache cache(output_cache(10));
  const std::vector<token_seq> prompts = {
      {1858, 1244, 307, 1223, 2642}, // "There might be something wrong"
      {4480, 262, 3303, 2746, 2438}, // "with the language model code"
      {1026, 338, 2192, 428, 393, 326},
      {4480, 262, 3303, 2746, 2438}, // the duplicate
  };
  std::vector<row_ptr> rows;
  for (const token_seq& p : prompts)
    rows.push_back(cache.next_token_logprobs(p));
  EXPECT_EQ(rows[1], rows[3]);
  EXPECT_EQ(cache.misses, 3);
  EXPECT_EQ(cache.trie.stats().logprob_entries, 3u);
  EXPECT_EQ(cache.trie.stats().nodes, 1u + 5 + 5 + 6);
}

// TokenTrie.extend_cache stores the log-probs after every prefix of a computed
// sequence: one node per token, each with its row.
void extend_cache(token_trie& t, const token_seq& s) {
  const std::vector<node_id> path = t.path(insert(t, s));
  for (node_id n : path)
    EXPECT_TRUE(t.attach_logprobs(n, fresh_row()));
}

// tests/test_hf_llm.py::test_caching: after the preprompt is computed, walking its
// tokens finds a node for each; the longer prompt then reuses the preprompt's nodes
// and extends them.
TEST(genlm_token_trie, caching_extends_the_preprompt_path) {
  token_trie t(output_cache(100));
  const token_seq preprompt = {1858, 1244, 307, 1223, 2642};
  token_seq prompt = preprompt;
  prompt.insert(prompt.end(), {351, 262, 40918, 9156});
  extend_cache(t, preprompt);

  node_id cur = root_node;
  for (std::size_t i = 0; i < preprompt.size(); ++i) {
    const match_result step =
        walk(t, token_seq(preprompt.begin(), preprompt.begin() + i + 1));
    EXPECT_EQ(step.length, i + 1);
    EXPECT_EQ(t.parent(step.node), cur);
    EXPECT_NE(step.logprobs, nullptr); // the row after each prefix
    cur = step.node;
  }

  const match_result before = walk(t, prompt);
  EXPECT_EQ(before.node, cur);
  EXPECT_EQ(before.length, preprompt.size());
  EXPECT_EQ(before.logprobs, nullptr);
  extend_cache(t, prompt);
  const match_result after = walk(t, prompt);
  EXPECT_EQ(after.length, prompt.size());
  EXPECT_NE(after.logprobs, nullptr);
  EXPECT_EQ(t.path(after.node)[preprompt.size() - 1], cur); // same nodes reused
  t.check_invariants();
}

// tests/test_hf_llm.py::test_cache_operations: after clear_cache, walk_cache of the
// prompt matches no token, finds no past and base 0.
TEST(genlm_token_trie, cleared_cache_matches_nothing) {
  token_trie t(output_cache(100));
  const token_seq prompt = {7594, 6152};
  extend_cache(t, prompt);
  ASSERT_TRUE(t.attach_kv(t.path(insert(t, prompt))[0], 0, 1, 64));
  t.clear();
  const match_result m = walk(t, prompt);
  EXPECT_EQ(m.length, 0u);
  EXPECT_EQ(m.node, root_node);
  EXPECT_EQ(m.kv[0].length, 0u);
  EXPECT_EQ(m.kv[0].handle, no_kv);
  ASSERT_EQ(t.take_released().size(), 1u);
}

// Upstream caches KV per computed prompt; here each token's KV is attached along the
// path, which prefix-closedness requires.
void cache_kv(token_trie& t, const token_seq& s, kv_handle base) {
  const std::vector<node_id> path = t.path(insert(t, s));
  for (std::size_t i = 0; i < path.size(); ++i)
    if (t.kv(path[i], 0) == no_kv) {
      ASSERT_TRUE(t.attach_kv(path[i], 0, base + i, 64));
    }
}

// tests/test_hf_llm.py::test_cache_kv: after cache_kv(prompt), walking the prompt
// reaches its end and the node there holds the past key/values.
TEST(genlm_token_trie, cache_kv_makes_the_prompt_resumable) {
  token_trie t(output_cache(100));
  const token_seq prompt = {14402, 509, 53, 40918};
  cache_kv(t, prompt, 100);
  const match_result m = walk(t, prompt);
  EXPECT_EQ(m.length, prompt.size());
  EXPECT_EQ(t.kv(m.node, 0), 103u);
  EXPECT_EQ(m.kv[0].length, prompt.size());
  EXPECT_EQ(m.kv[0].handle, 103u);
  t.clear_kv();
  EXPECT_EQ(walk(t, prompt).kv[0].length, 0u);
  EXPECT_EQ(t.take_released().size(), prompt.size());
}

// walk_cache records a node's past before stepping past it, so the KV used for a
// query ends at most one token before its end: a query needs the row after its last
// token, so kv_cap = n - 1. From tests/test_hf_llm.py::test_walk_cache_with_past
// (skipped upstream as flaky): the logprobs of an extended prompt are computed, then
// the base prompt's KV is cached, and the walk of the extended prompt resumes from
// base == len(base_prompt). Upstream's cache_kv rebuilds the base prompt's nodes and
// so drops the extension (next_token_index == len(base_prompt) there); the trie keeps
// existing nodes, so the whole extended prompt still matches.
TEST(genlm_token_trie, walk_with_past_resumes_after_the_cached_base) {
  token_trie t(output_cache(100));
  const token_seq base = {1212, 318, 257, 1332, 286};
  token_seq extended = base;
  extended.push_back(40918);
  extend_cache(t, extended);
  const row_ptr before = walk(t, extended).logprobs;
  cache_kv(t, base, 500);

  const auto cap = static_cast<std::uint32_t>(extended.size() - 1);
  const match_result m = walk(t, extended, cap);
  EXPECT_EQ(m.kv[0].length, base.size());
  EXPECT_EQ(m.kv[0].handle, 504u);
  EXPECT_EQ(m.length, extended.size());
  // tests/test_hf_llm.py::test_next_token_logprobs_with_kv_cache: caching KV does
  // not change the stored answer.
  EXPECT_EQ(m.logprobs, before);

  // Querying the base itself resumes one token short of its end.
  const match_result own = walk(t, base, static_cast<std::uint32_t>(base.size() - 1));
  EXPECT_EQ(own.kv[0].length, base.size() - 1);
  EXPECT_EQ(own.kv[0].handle, 503u);
}

// tests/test_mlx.py::test_kv_reuse_matches_cold_prefill and
// test_kv_fork_matches_cold_prefill: once the contexts are computed (KV held), each
// context + [100] resumes from the context's full KV, and two forks of one parent
// (parent + [100], parent + [101]) both resume from the parent's KV.
TEST(genlm_token_trie, continuations_and_forks_reuse_the_parents_kv) {
  token_trie t(output_cache(100));
  const token_seq parent = {1858, 1244, 307, 1223, 2642, 11};
  const token_seq other = {4480, 262, 3303, 2746, 2438};
  cache_kv(t, parent, 100);
  cache_kv(t, other, 200);
  const std::vector<token_seq> forked = {parent, parent, other};
  const token_id next[] = {100, 101, 102};
  for (std::size_t i = 0; i < forked.size(); ++i) {
    token_seq query = forked[i];
    query.push_back(next[i]);
    const auto cap = static_cast<std::uint32_t>(query.size() - 1);
    const match_result m = walk(t, query, cap);
    EXPECT_EQ(m.length, query.size() - 1); // the new token is not cached yet
    EXPECT_EQ(m.kv[0].length, query.size() - 1);
    EXPECT_EQ(m.kv[0].handle, (i < 2 ? 100u : 200u) + query.size() - 2);
    EXPECT_EQ(m.logprobs, nullptr);
  }
  // Both forks extend the same parent node.
  const node_id a = insert(t, {1858, 1244, 307, 1223, 2642, 11, 100});
  const node_id b = insert(t, {1858, 1244, 307, 1223, 2642, 11, 101});
  EXPECT_EQ(t.parent(a), t.parent(b));
  EXPECT_TRUE(t.attach_kv(a, 0, 900, 64));
  EXPECT_TRUE(t.attach_kv(b, 0, 901, 64));
  t.check_invariants();
}

// TokenKVTrie.extend_cache_from_base fills in a node's log-probs or key/values only
// when missing: what a node already holds is kept. The trie keeps an existing row;
// for KV it refuses the second handle, which stays the caller's to free.
TEST(genlm_token_trie, existing_entries_are_kept) {
  token_trie t(output_cache(100));
  const node_id n = insert(t, {5, 6});
  const row_ptr kept = fresh_row();
  ASSERT_TRUE(t.attach_logprobs(n, kept));
  EXPECT_TRUE(t.attach_logprobs(n, fresh_row()));
  EXPECT_EQ(t.logprobs(n), kept);
  ASSERT_TRUE(t.attach_kv(t.parent(n), 0, 1, 64));
  ASSERT_TRUE(t.attach_kv(n, 0, 2, 64));
  EXPECT_FALSE(t.attach_kv(n, 0, 3, 64));
  EXPECT_EQ(t.kv(n, 0), 2u);
  EXPECT_TRUE(t.take_released().empty());
}

// TokenTrie.clear_kv_cache drops key/values everywhere and keeps the log-probs.
TEST(genlm_token_trie, clear_kv_cache_keeps_logprobs) {
  token_trie t(output_cache(100));
  const token_seq prompt = {3, 1, 4, 1, 5};
  extend_cache(t, prompt);
  cache_kv(t, prompt, 10);
  t.clear_kv();
  for (std::size_t n = 1; n <= prompt.size(); ++n) {
    const match_result m = walk(t, token_seq(prompt.begin(), prompt.begin() + n));
    EXPECT_NE(m.logprobs, nullptr);
    EXPECT_EQ(m.kv[0].length, 0u);
  }
  EXPECT_EQ(t.stats().kv_entries[0], 0u);
  EXPECT_EQ(t.take_released().size(), prompt.size());
}

} // namespace
} // namespace canopy::cache
