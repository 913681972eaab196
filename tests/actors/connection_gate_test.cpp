// The cluster token's challenge-response on the raw connection (connection_gate.hpp):
// two gates with one secret pass each other; every mismatch fails on the side that can
// tell, with the reason a front reports; a node never wants more than 64 bytes.

#include <canopy/actors/connection_gate.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using canopy::actors::auth_role;
using canopy::actors::connection_gate;

/// Runs the exchange between a node and a front gate until either passes or fails.
void exchange(connection_gate& node, connection_gate& front) {
  auto to_front = node.opening();
  EXPECT_TRUE(front.opening().empty()) << "a front speaks second";
  ASSERT_EQ(to_front.size(), front.wanted());
  auto to_node = front.take(to_front.data(), to_front.size());
  if (front.failed())
    return;
  ASSERT_EQ(to_node.size(), node.wanted());
  EXPECT_LE(node.wanted(), 64u) << "all a stranger can make a node read";
  auto confirmation = node.take(to_node.data(), to_node.size());
  if (node.failed())
    return;
  ASSERT_EQ(confirmation.size(), front.wanted());
  front.take(confirmation.data(), confirmation.size());
}

TEST(connection_gate, one_secret_passes_both_ways_and_then_wants_nothing) {
  for (const std::string secret : {"correct horse", ""}) {
    connection_gate node(auth_role::node, secret), front(auth_role::front, secret);
    exchange(node, front);
    EXPECT_TRUE(node.passed()) << node.failure();
    EXPECT_TRUE(front.passed()) << front.failure();
    EXPECT_EQ(node.wanted(), 0u);
    EXPECT_EQ(front.wanted(), 0u);
  }
}

TEST(connection_gate,
     tokens_that_differ_fail_at_the_node_and_the_front_learns_it_on_close) {
  connection_gate node(auth_role::node, "ours"), front(auth_role::front, "theirs");
  exchange(node, front);
  EXPECT_TRUE(node.failed());
  EXPECT_EQ(node.failure(), "could not prove the cluster token (the tokens differ)");
  EXPECT_FALSE(front.passed());
  EXPECT_NE(front.why_closed().find("could not prove the cluster token"),
            std::string::npos);
}

TEST(connection_gate, a_front_and_a_node_that_disagree_on_having_a_token_say_which) {
  connection_gate node(auth_role::node, "secret"), bare_front(auth_role::front, "");
  exchange(node, bare_front);
  EXPECT_EQ(bare_front.failure(),
            "requires a cluster token and this front has none (cluster_token_file)");
  connection_gate bare_node(auth_role::node, ""), front(auth_role::front, "secret");
  exchange(bare_node, front);
  EXPECT_EQ(front.failure(), "has no cluster token and this front requires one");
}

TEST(connection_gate, anything_but_the_magic_or_the_wanted_size_fails) {
  connection_gate front(auth_role::front, "s");
  std::string basp_header(front.wanted(), '\0');
  basp_header[7] = '\x7f';
  front.take(basp_header.data(), basp_header.size());
  EXPECT_NE(front.failure().find("did not open with canopy's cluster handshake"),
            std::string::npos);

  connection_gate node(auth_role::node, "s");
  node.opening();
  const std::string short_answer(10, 'x');
  node.take(short_answer.data(), short_answer.size());
  EXPECT_TRUE(node.failed());
  EXPECT_EQ(node.wanted(), 0u);
  EXPECT_TRUE(node.take(short_answer.data(), 0).empty());
}

} // namespace
