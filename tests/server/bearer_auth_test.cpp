// Bearer-token checks (the transport's private helper): what is accepted, what is not.

#include "bearer_auth.hpp"

#include <gtest/gtest.h>

namespace canopy::server {
namespace {

TEST(constant_time_equal, is_equality) {
  EXPECT_TRUE(constant_time_equal("s3cret", "s3cret"));
  EXPECT_FALSE(constant_time_equal("s3creT", "s3cret"));
  EXPECT_FALSE(constant_time_equal("X3cret", "s3cret"));
  EXPECT_FALSE(constant_time_equal("s3cre", "s3cret"));
  EXPECT_FALSE(constant_time_equal("s3crets3cret", "s3cret")); // the secret, repeated
  EXPECT_FALSE(constant_time_equal("", "s3cret"));
}

TEST(bearer_authorized, needs_the_bearer_scheme_and_exactly_the_token) {
  EXPECT_TRUE(bearer_authorized("Bearer tok", "tok"));
  EXPECT_TRUE(bearer_authorized("bearer tok", "tok"));
  EXPECT_TRUE(bearer_authorized("BEARER  tok ", "tok"));
  EXPECT_FALSE(bearer_authorized("Bearer tok2", "tok"));
  EXPECT_FALSE(bearer_authorized("Bearer to", "tok"));
  EXPECT_FALSE(bearer_authorized("Bearer t ok", "tok"));
  EXPECT_FALSE(bearer_authorized("Basic tok", "tok"));
  EXPECT_FALSE(bearer_authorized("Bearertok", "tok"));
  EXPECT_FALSE(bearer_authorized("tok", "tok"));
  EXPECT_FALSE(bearer_authorized("Bearer ", "tok"));
  EXPECT_FALSE(bearer_authorized("", "tok"));
}

} // namespace
} // namespace canopy::server
