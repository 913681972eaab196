// Long random interleavings of every trie operation over a three-token alphabet with
// small budgets, checked after every step against a reference of what was attached:
// invariants hold, budgets hold, locked nodes keep what they hold, answers never
// change (a row found is the row attached for that sequence), refusals happen exactly
// when evicting every unlocked holder would not make room, and every KV handle is
// either still held or released exactly once. Workers are added mid-run, each with its
// own KV budget, and a forgotten worker may come back with another budget. Some runs
// have a sliding window, where KV is kept only within W-1 levels above a lock and a
// usable KV prefix needs its W-1 last tokens' KV. Some runs give each worker a host
// tier: device KV is demoted there instead of dropped, and locked paths are promoted
// back (promote_kv), within both budgets. Sequences fall in three partitions (the
// shared one, "a" and "ab"), and bulk drops sometimes take only the partitions whose
// names start with "a" or "ab": a row or KV handle found is always its own partition's.

#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string_view>
#include <vector>

namespace canopy::cache {
namespace {

constexpr token_id alphabet = 3;
constexpr std::size_t max_locks = 6;
constexpr std::uint32_t max_workers = 5;

// A key is a partition's index followed by the tokens: the partitions below, by index.
const std::string_view partition_names[] = {"", "a", "ab"};
constexpr std::size_t partition_count = 3;

class sized_extra final : public row_extra {
public:
  explicit sized_extra(std::size_t bytes) : bytes_(bytes) {}
  std::size_t bytes() const override { return bytes_; }

private:
  std::size_t bytes_;
};

struct lock_record {
  node_id node = root_node;
  token_seq seq;
  row_ptr row;               // what the node holds; must not change while locked
  std::vector<kv_handle> kv; // [workers]
};

struct handle_record {
  token_seq seq;
  worker_id worker = 0;
  std::size_t bytes = 0;
  bool gone = false; // released, or dropped by forget_worker
};

// The values a row for `s` holds: a pure function of the sequence, so a row found for
// `s` can be checked whichever attach stored it.
row_ptr row_for(const token_seq& s) {
  std::uint32_t h = 17;
  for (token_id t : s)
    h = h * 31 + static_cast<std::uint32_t>(t) + 1;
  const std::size_t vocab = 1 + h % 4;
  const auto dtype = static_cast<row_dtype>(h % 3);
  std::vector<float> values(vocab);
  for (std::size_t i = 0; i < vocab; ++i)
    values[i] = -0.25f * static_cast<float>(i + 1) - static_cast<float>(h % 7);
  return logprob_row::encode(values.data(), vocab, dtype);
}

std::vector<float> decoded(const logprob_row& row) {
  std::vector<float> out(row.vocab());
  row.decode(out.data());
  return out;
}

bool fits_in(std::size_t used, std::size_t extra, std::size_t budget) {
  return extra <= budget && used <= budget - extra;
}

class fuzzer {
public:
  // Sequences are 1 to max_length tokens long.
  fuzzer(trie_config config, std::uint32_t seed, std::size_t max_length)
      : config_(config), trie_(config), rng_(seed),
        budgets_(config.workers, config.kv_budget_bytes), max_length_(max_length) {}

  void run(int steps) {
    for (int i = 0; i < steps && !::testing::Test::HasFatalFailure(); ++i) {
      step();
      check_step();
    }
    for (const lock_record& r : locks_)
      trie_.unlock(r.node);
    locks_.clear();
    take_released();
    check_held_handles();
    trie_.check_invariants();
  }

  const trie_stats& stats() const { return trie_.stats(); }

private:
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  // A key (see partition_names) with 1 to max_length tokens.
  token_seq random_seq() {
    token_seq s(2 + pick(max_length_));
    s[0] = static_cast<token_id>(pick(partition_count));
    for (std::size_t i = 1; i < s.size(); ++i)
      s[i] = static_cast<token_id>(pick(alphabet));
    return s;
  }

  node_id insert(const token_seq& s) {
    const node_id n = trie_.insert(partition_names[s[0]], s.data() + 1, s.size() - 1,
                                   static_cast<std::int32_t>(pick(5)) - 2);
    EXPECT_EQ(tokens_of(n), s);
    return n;
  }

  match_result match_key(const token_seq& s, std::int32_t priority = 0,
                         std::uint32_t cap = std::numeric_limits<std::uint32_t>::max()) {
    return trie_.match(partition_names[s[0]], s.data() + 1, s.size() - 1, priority, cap);
  }

  // The key of the node's sequence: its partition, then its tokens.
  token_seq tokens_of(node_id n) const {
    const auto name = trie_.partition(n);
    const auto* p =
        std::find(std::begin(partition_names), std::end(partition_names), name);
    EXPECT_NE(p, std::end(partition_names)) << "a partition nobody made";
    token_seq s{static_cast<token_id>(p - std::begin(partition_names))};
    for (node_id node : trie_.path(n))
      s.push_back(trie_.token(node));
    return s;
  }

  // A node to attach to: a locked one, or a sequence inserted just now.
  std::pair<node_id, token_seq> target() {
    if (!locks_.empty() && pick(2) == 0) {
      const lock_record& r = locks_[pick(locks_.size())];
      return {r.node, r.seq};
    }
    token_seq s = random_seq();
    return {insert(s), s};
  }

  // Nodes no eviction may touch while attaching to `n`: every locked path and n's
  // path, or with a window `w` > 0 the last w nodes of each.
  std::set<node_id> protected_nodes(node_id n, std::uint32_t window = 0) const {
    std::set<node_id> nodes;
    const auto add_path = [&](node_id end) {
      const std::vector<node_id> path = trie_.path(end);
      const std::size_t from =
          window == 0 || path.size() <= window ? 0 : path.size() - window;
      nodes.insert(path.begin() + static_cast<std::ptrdiff_t>(from), path.end());
    };
    for (const lock_record& r : locks_)
      add_path(r.node);
    add_path(n);
    return nodes;
  }

  // The longest prefix of `path`, at most `reach` long, whose KV on `w` a pass can
  // continue from: its last W-1 tokens hold KV (every token without a window).
  std::uint32_t usable_kv_prefix(const std::vector<node_id>& path, worker_id w,
                                 std::uint32_t reach) const {
    const std::uint32_t window = config_.kv_window;
    for (std::uint32_t end = reach; end > 0; --end) {
      const std::uint32_t need =
          window == 0 ? end : std::min(end, std::max(window, 2u) - 1);
      bool held = true;
      for (std::uint32_t d = end - need; d < end && held; ++d)
        held = trie_.kv(path[d], w) != no_kv;
      if (held)
        return end;
    }
    return 0;
  }

  // Whether a child of `s` holds KV on `w` (the trie then refuses KV at s: Note
  // [windowed KV]). Only windows get here: without one, prefix-closed KV rules it out.
  bool child_holds_kv(const token_seq& s, worker_id w) {
    for (token_id t = 0; t < alphabet; ++t) {
      token_seq child = s;
      child.push_back(t);
      const match_result m = match_key(child);
      if (m.length == child.size() - 1 && trie_.kv(m.node, w) != no_kv)
        return true;
    }
    return false;
  }

  void step() {
    const std::size_t op = pick(100);
    if (op < 15)
      insert(random_seq());
    else if (op < 40)
      match();
    else if (op < 48)
      lock();
    else if (op < 56)
      unlock();
    else if (op < 68)
      attach_logprobs();
    else if (op < 72)
      attach_extra();
    else if (op < 92)
      attach_kv();
    else if (op < 94 && config_.kv_host_budget_bytes != 0)
      promote();
    else if (op < 98)
      take_released();
    else if (op < 99)
      trie_.clear_kv(partition_names[pick(partition_count)]);
    else if (pick(2) == 0)
      trie_.clear(partition_names[pick(partition_count)]);
    else if (pick(4) == 0)
      forget_worker();
    else if (pick(2) == 0)
      add_worker();
  }

  std::uint32_t workers() const { return static_cast<std::uint32_t>(budgets_.size()); }

  // Budgets between a third and twice the initial one, so workers differ.
  std::size_t random_budget() {
    return config_.kv_budget_bytes / 3 + pick(2 * config_.kv_budget_bytes);
  }

  void add_worker() {
    if (workers() >= max_workers)
      return;
    const std::size_t budget = random_budget();
    ASSERT_EQ(trie_.add_worker(budget, config_.kv_host_budget_bytes), workers());
    budgets_.push_back(budget);
    for (lock_record& r : locks_)
      r.kv.push_back(no_kv);
  }

  void match() {
    const token_seq s = random_seq();
    const std::uint32_t n = static_cast<std::uint32_t>(s.size() - 1);
    const std::uint32_t caps[] = {std::numeric_limits<std::uint32_t>::max(), n - 1,
                                  static_cast<std::uint32_t>(pick(n + 1))};
    const std::uint32_t cap = caps[pick(3)];
    const match_result m = match_key(s, static_cast<std::int32_t>(pick(5)) - 2, cap);
    if (m.node == no_node) { // a partition with no nodes
      ASSERT_NE(s[0], 0) << "the shared partition always has its root";
      EXPECT_EQ(m.length, 0u);
      EXPECT_EQ(m.logprobs, nullptr);
      for (const kv_prefix& kv : m.kv)
        EXPECT_EQ(kv.length, 0u);
      return;
    }

    const std::vector<node_id> path = trie_.path(m.node);
    ASSERT_EQ(path.size(), m.length);
    ASSERT_EQ(tokens_of(m.node), token_seq(s.begin(), s.begin() + 1 + m.length));
    if (m.length < n) {
      EXPECT_EQ(m.logprobs, nullptr);
    }
    if (m.logprobs) {
      EXPECT_EQ(m.logprobs, expected_row_[s]) << "a row changed without an attach";
      EXPECT_EQ(decoded(*m.logprobs), decoded(*row_for(s)));
    }
    const std::uint32_t reach = std::min(cap, m.length);
    ASSERT_EQ(m.kv.size(), workers());
    for (worker_id w = 0; w < workers(); ++w) {
      const kv_prefix& kv = m.kv[w];
      ASSERT_EQ(kv.length, usable_kv_prefix(path, w, reach));
      if (kv.length == 0) {
        EXPECT_EQ(kv.handle, no_kv);
        continue;
      }
      EXPECT_EQ(kv.handle, trie_.kv(path[kv.length - 1], w));
      const auto it = handles_.find(kv.handle);
      ASSERT_NE(it, handles_.end());
      EXPECT_FALSE(it->second.gone);
      EXPECT_EQ(it->second.worker, w);
      EXPECT_EQ(it->second.seq, token_seq(s.begin(), s.begin() + 1 + kv.length));
    }
  }

  void lock() {
    if (locks_.size() >= max_locks)
      return;
    lock_record r;
    r.seq = random_seq();
    r.node = insert(r.seq);
    trie_.lock(r.node);
    r.row = trie_.logprobs(r.node);
    for (worker_id w = 0; w < workers(); ++w)
      r.kv.push_back(trie_.kv(r.node, w));
    locks_.push_back(r);
  }

  void unlock() {
    if (locks_.empty())
      return;
    const std::size_t i = pick(locks_.size());
    trie_.unlock(locks_[i].node);
    locks_.erase(locks_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void attach_logprobs() {
    const auto [n, s] = target();
    const row_ptr before = trie_.logprobs(n);
    row_ptr row = row_for(s);
    std::size_t protected_bytes = 0, protected_rows = 0;
    for (node_id p : protected_nodes(n))
      if (const row_ptr held = trie_.logprobs(p)) {
        protected_bytes += held_bytes(p);
        ++protected_rows;
      }
    const std::size_t max_rows = config_.logprob_max_entries;
    const bool room =
        fits_in(protected_bytes, row->bytes(), config_.logprob_budget_bytes) &&
        (max_rows == 0 || protected_rows < max_rows);
    const std::uint64_t refused = trie_.stats().refused_attaches;

    const bool ok = trie_.attach_logprobs(n, row);
    ASSERT_EQ(ok, before != nullptr || room);
    EXPECT_EQ(trie_.stats().refused_attaches, refused + (ok ? 0 : 1));
    if (!ok)
      return;
    const row_ptr after = trie_.logprobs(n);
    EXPECT_EQ(after, before ? before : row);
    if (before) {
      EXPECT_EQ(before, expected_row_[s]);
    }
    expected_row_[s] = after;
    for (lock_record& r : locks_)
      if (r.node == n)
        r.row = after;
  }

  // A node's row and extra bytes.
  std::size_t held_bytes(node_id n) const {
    const row_extra_ptr extra = trie_.extra(n);
    return trie_.logprobs(n)->bytes() + (extra ? extra->bytes() : 0);
  }

  // An extra of up to a row's bytes beside the row the target holds, if any.
  void attach_extra() {
    const auto [n, s] = target();
    const row_ptr row = trie_.logprobs(n);
    if (!row)
      return;
    const bool had_extra = trie_.extra(n) != nullptr;
    std::size_t protected_bytes = 0;
    for (node_id p : protected_nodes(n))
      if (trie_.logprobs(p))
        protected_bytes += held_bytes(p);
    const auto extra = std::make_shared<sized_extra>(1 + pick(row->bytes()));
    const bool room =
        fits_in(protected_bytes, extra->bytes(), config_.logprob_budget_bytes);
    const bool ok = trie_.attach_extra(n, row, extra);
    ASSERT_EQ(ok, !had_extra && room);
    EXPECT_EQ(trie_.logprobs(n), row) << "an extra's attach replaced its row";
    if (ok) {
      EXPECT_EQ(trie_.extra(n), extra);
    }
  }

  // Mostly one token past a KV prefix that exists, where an attach can succeed.
  std::pair<node_id, token_seq> kv_target(worker_id w) {
    if (pick(5) == 0)
      return target();
    token_seq s = random_seq();
    const match_result m = match_key(s);
    s.resize(std::min<std::size_t>(s.size(), m.kv[w].length + 2));
    return {insert(s), s};
  }

  void attach_kv() {
    const auto w = static_cast<worker_id>(pick(workers()));
    const auto [n, s] = kv_target(w);
    const std::size_t budget = budgets_[w];
    // About 6 entries fit a budget; under a window about 2W + 4, so that runs of W-1
    // entries not starting at the first token (what windows leave) fit too.
    const std::size_t share = config_.kv_window == 0 ? 3 : config_.kv_window + 2;
    const std::size_t bytes = pick(20) == 0 ? budget + 1 : 1 + pick(budget / share);
    const kv_handle handle = next_handle_++;
    const node_id up = trie_.parent(n);
    const bool prefix_ok =
        trie_.depth(up) == 0 || (trie_.kv(up, w) != no_kv && !trie_.kv_on_host(up, w));
    const bool vacant =
        trie_.kv(n, w) == no_kv && (config_.kv_window == 0 || !child_holds_kv(s, w));
    std::size_t protected_bytes = 0;
    for (node_id p : protected_nodes(n, config_.kv_window))
      if (const kv_handle h = trie_.kv(p, w); h != no_kv && !trie_.kv_on_host(p, w))
        protected_bytes += handles_.at(h).bytes; // host KV takes no device room
    const bool room = fits_in(protected_bytes, bytes, budget);

    const bool ok = trie_.attach_kv(n, w, handle, bytes);
    ASSERT_EQ(ok, vacant && prefix_ok && room);
    if (!ok)
      return; // the handle stays ours: it must never come back as a release
    handles_[handle] = handle_record{s, w, bytes, false};
    EXPECT_EQ(trie_.kv(n, w), handle);
    for (lock_record& r : locks_)
      if (r.node == n)
        r.kv[w] = handle;
  }

  // A locked path's host KV goes back to the device as far as the device has room:
  // down to the depth returned every node's KV is on the device, and the next one's,
  // if any, is still on the host.
  void promote() {
    if (locks_.empty())
      return;
    const lock_record& r = locks_[pick(locks_.size())];
    const auto w = static_cast<worker_id>(pick(workers()));
    const std::uint32_t depth = trie_.promote_kv(r.node, w);
    const std::vector<node_id> path = trie_.path(r.node);
    ASSERT_LE(depth, path.size());
    for (std::uint32_t d = 0; d < depth; ++d)
      if (trie_.kv(path[d], w) != no_kv) {
        EXPECT_FALSE(trie_.kv_on_host(path[d], w)) << "depth " << d + 1;
      }
    if (depth < path.size()) {
      EXPECT_TRUE(trie_.kv_on_host(path[depth], w)) << "promotion stopped before host KV";
    }
  }

  void release(const kv_release& r) {
    const auto it = handles_.find(r.handle);
    ASSERT_NE(it, handles_.end()) << "released a handle the trie never accepted";
    EXPECT_FALSE(it->second.gone) << "handle " << r.handle << " released twice";
    EXPECT_EQ(it->second.worker, r.worker);
    it->second.gone = true;
  }

  // With nothing left in the queue, the handles not yet released are exactly what the
  // trie accounts per worker.
  void take_released() {
    for (const kv_release& r : trie_.take_demoted()) {
      const auto it = handles_.find(r.handle);
      ASSERT_NE(it, handles_.end()) << "demoted a handle the trie never accepted";
      EXPECT_EQ(it->second.worker, r.worker);
    }
    for (const kv_release& r : trie_.take_released())
      release(r);
    std::vector<std::uint64_t> held(workers()), in_tiers(workers());
    for (const auto& [handle, h] : handles_)
      if (!h.gone)
        held[h.worker] += h.bytes;
    for (worker_id w = 0; w < workers(); ++w)
      in_tiers[w] = trie_.stats().kv_bytes[w] + trie_.stats().kv_host_bytes[w];
    EXPECT_EQ(held, in_tiers);
  }

  // A worker is lost; sometimes it comes back with another budget, holding nothing.
  void forget_worker() {
    const auto w = static_cast<worker_id>(pick(workers()));
    trie_.forget_worker(w);
    for (auto& [handle, h] : handles_)
      if (h.worker == w)
        h.gone = true;
    for (lock_record& r : locks_)
      r.kv[w] = no_kv;
    if (pick(2) == 0) {
      budgets_[w] = random_budget();
      trie_.set_kv_budget(w, budgets_[w], config_.kv_host_budget_bytes);
    }
  }

  void check_step() {
    trie_.check_invariants();
    const trie_stats& st = trie_.stats();
    ASSERT_LE(st.logprob_bytes, config_.logprob_budget_bytes);
    if (config_.logprob_max_entries != 0) {
      ASSERT_LE(st.logprob_entries, config_.logprob_max_entries);
    }
    ASSERT_EQ(trie_.workers(), workers());
    for (worker_id w = 0; w < workers(); ++w) {
      ASSERT_EQ(trie_.kv_budget(w), budgets_[w]);
      ASSERT_LE(st.kv_bytes[w], budgets_[w]);
      ASSERT_LE(st.kv_host_bytes[w], config_.kv_host_budget_bytes);
    }
    for (const lock_record& r : locks_) {
      ASSERT_TRUE(trie_.exists(r.node));
      ASSERT_EQ(tokens_of(r.node), r.seq);
      EXPECT_EQ(trie_.logprobs(r.node), r.row);
      for (worker_id w = 0; w < workers(); ++w)
        EXPECT_EQ(trie_.kv(r.node, w), r.kv[w]);
    }
  }

  void check_held_handles() {
    for (const auto& [handle, h] : handles_) {
      if (h.gone)
        continue;
      const match_result m = match_key(h.seq);
      ASSERT_EQ(m.length, h.seq.size() - 1)
          << "handle " << handle << " lost, never released";
      EXPECT_EQ(trie_.kv(m.node, h.worker), handle);
    }
  }

  trie_config config_;
  token_trie trie_;
  std::mt19937 rng_;
  std::map<token_seq, row_ptr> expected_row_;
  std::vector<std::size_t> budgets_; // [workers] the KV budget each worker has now
  std::map<kv_handle, handle_record> handles_;
  std::vector<lock_record> locks_;
  kv_handle next_handle_ = 1;
  std::size_t max_length_;
};

struct scenario {
  eviction_policy policy;
  std::size_t max_entries;
  std::uint32_t workers;
  std::uint32_t seed;
  std::uint32_t kv_window = 0;
  std::size_t kv_host_budget = 0; // each worker's host tier (no window)
};

class token_trie_randomized : public ::testing::TestWithParam<scenario> {};

TEST_P(token_trie_randomized, interleaved_operations_keep_every_invariant) {
  const scenario& sc = GetParam();
  trie_config c;
  c.logprob_budget_bytes = 48; // rows are 2..16 bytes
  c.logprob_max_entries = sc.max_entries;
  c.kv_budget_bytes = 30;
  c.workers = sc.workers;
  c.policy = sc.policy;
  c.kv_window = sc.kv_window;
  c.kv_host_budget_bytes = sc.kv_host_budget;
  // Under a window, paths long enough to hold runs of KV that do not start at the
  // first token, as windows leave them.
  fuzzer f(c, sc.seed, sc.kv_window == 0 ? 5 : 2 * sc.kv_window + 1);
  f.run(25000);
  const trie_stats& st = f.stats();
  std::cout << "[randomized " << to_string(sc.policy) << ", window " << sc.kv_window
            << "] row evictions " << st.logprob_evictions << ", KV evictions "
            << st.kv_evictions << ", demotions " << st.kv_demotions << ", promotions "
            << st.kv_promotions << ", refused " << st.refused_attaches
            << ", nodes removed " << st.nodes_removed << "\n";
  // The budgets were tight enough to exercise every path.
  EXPECT_GT(f.stats().logprob_evictions, 100u);
  EXPECT_GT(f.stats().refused_attaches, 10u);
  EXPECT_GT(f.stats().nodes_removed, 100u);
  if (sc.kv_host_budget == 0) {
    EXPECT_GT(f.stats().kv_evictions, 100u);
  } else { // the device demotes; the host tier evicts
    EXPECT_GT(f.stats().kv_demotions, 100u);
    EXPECT_GT(f.stats().kv_evictions, 10u);
    EXPECT_GT(f.stats().kv_promotions, 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(seeds, token_trie_randomized,
                         ::testing::Values(scenario{eviction_policy::lru, 0, 2, 1},
                                           scenario{eviction_policy::lfu, 4, 3, 2},
                                           scenario{eviction_policy::fifo, 0, 2, 3},
                                           scenario{eviction_policy::priority, 5, 3, 4},
                                           scenario{eviction_policy::lru, 0, 2, 5, 2},
                                           scenario{eviction_policy::lfu, 4, 3, 6, 3},
                                           scenario{eviction_policy::fifo, 0, 1, 7, 4},
                                           scenario{eviction_policy::lru, 0, 2, 8, 0, 20},
                                           scenario{eviction_policy::priority, 5, 3, 9, 0,
                                                    40}));

} // namespace
} // namespace canopy::cache
