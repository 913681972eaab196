// The shared byte budget: reservations grow and shrink within the limit, give their
// bytes back when destroyed or moved from, and many threads never take more than it.

#include <canopy/server/transport/byte_budget.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace canopy::server {
namespace {

TEST(byte_budget, reservations_stay_within_the_limit_and_give_back_what_they_held) {
  auto budget = std::make_shared<byte_budget>(100);
  auto a = budget->reservation();
  EXPECT_TRUE(a.resize(60));
  auto b = budget->reservation();
  EXPECT_FALSE(b.resize(41)) << "60 + 41 is past 100";
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_TRUE(b.resize(40));
  EXPECT_EQ(budget->used(), 100u);
  EXPECT_TRUE(a.resize(10)) << "shrinking always fits";
  EXPECT_EQ(budget->used(), 50u);
  {
    auto moved = std::move(b);
    EXPECT_EQ(b.bytes(), 0u);
    EXPECT_EQ(budget->used(), 50u) << "a move carries the bytes, not a copy of them";
  }
  EXPECT_EQ(budget->used(), 10u) << "destroyed: its 40 bytes are back";
  a.reset();
  EXPECT_EQ(budget->used(), 0u);
}

TEST(byte_budget, threads_racing_for_room_never_overdraw_it) {
  auto budget = std::make_shared<byte_budget>(1000);
  std::vector<std::thread> threads;
  std::atomic<std::size_t> peak{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto r = budget->reservation();
        if (r.resize(300)) {
          auto used = budget->used();
          auto seen = peak.load();
          while (used > seen && !peak.compare_exchange_weak(seen, used)) {
          }
        }
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_LE(peak.load(), 900u) << "at most three reservations of 300 fit in 1000";
  EXPECT_EQ(budget->used(), 0u);
}

} // namespace
} // namespace canopy::server
