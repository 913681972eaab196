// The cluster secret's handshake pieces: proofs depend on the secret, the role and both
// nonces (so a proof can be neither reused nor reflected), compare in constant time,
// and the session token both sides derive agrees; secrets come from the first line of
// a file; loopback is what only this machine reaches.

#include "scratch_files.hpp"

#include <canopy/actors/cluster_auth.hpp>
#include <canopy/error.hpp>

#include <gtest/gtest.h>

namespace {

using namespace canopy::actors;

TEST(cluster_auth, a_proof_depends_on_the_secret_the_role_and_both_nonces) {
  const auto front = fresh_nonce(), node = fresh_nonce();
  EXPECT_EQ(front.size(), 32u);
  EXPECT_NE(front, node) << "nonces are fresh";
  const auto proof = auth_proof("s3cret", auth_role::node, front, node);
  EXPECT_EQ(proof.size(), 32u); // HMAC-SHA256
  EXPECT_TRUE(same_proof(proof, auth_proof("s3cret", auth_role::node, front, node)));
  EXPECT_FALSE(same_proof(proof, auth_proof("s3cret!", auth_role::node, front, node)));
  EXPECT_FALSE(same_proof(proof, auth_proof("s3cret", auth_role::front, front, node)))
      << "the node's proof cannot pass for the front's";
  EXPECT_FALSE(
      same_proof(proof, auth_proof("s3cret", auth_role::node, fresh_nonce(), node)));
  EXPECT_FALSE(
      same_proof(proof, auth_proof("s3cret", auth_role::node, front, fresh_nonce())));
  EXPECT_FALSE(same_proof(proof, auth_bytes(proof.begin(), proof.end() - 1)));
  EXPECT_FALSE(same_proof({}, {})) << "no proof is not a proof";
}

TEST(cluster_auth, both_sides_derive_the_same_session_token_from_the_nonces) {
  const auto front = fresh_nonce(), node = fresh_nonce();
  const auto token = session_token("s3cret", front, node);
  EXPECT_EQ(token, session_token("s3cret", front, node));
  EXPECT_NE(token, session_token("s3cret", node, front));
  EXPECT_NE(token, session_token("other", front, node));
  EXPECT_NE(token, 0u);
  EXPECT_NE(random_session_token(), random_session_token());
}

TEST(cluster_auth, the_secret_is_the_first_line_of_its_file) {
  canopy::testing::scratch_dir dir;
  canopy::testing::write_bytes(dir.path() / "token", "  open sesame \t\r\nsecond line\n");
  EXPECT_EQ(read_cluster_secret((dir.path() / "token").string()), "  open sesame");
  canopy::testing::write_bytes(dir.path() / "empty", "\n");
  EXPECT_THROW(read_cluster_secret((dir.path() / "empty").string()), canopy::error);
  try {
    read_cluster_secret((dir.path() / "absent").string());
    ADD_FAILURE() << "an absent file was read";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
}

TEST(cluster_auth, loopback_is_what_only_this_machine_reaches) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost"})
    EXPECT_TRUE(is_loopback(host)) << host;
  for (const char* host : {"0.0.0.0", "10.0.0.1", "::", "example.org", "128.0.0.1"})
    EXPECT_FALSE(is_loopback(host)) << host;
}

} // namespace
