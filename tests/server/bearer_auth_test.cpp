// Bearer-token checks (the transport's private helper): what is accepted, what is not.

#include "transport/bearer_auth.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

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

TEST(bearer_tenant, needs_the_bearer_scheme_and_exactly_the_token) {
  EXPECT_TRUE(bearer_tenant("Bearer tok", {"tok"}).has_value());
  EXPECT_TRUE(bearer_tenant("bearer tok", {"tok"}).has_value());
  EXPECT_TRUE(bearer_tenant("BEARER  tok ", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Bearer tok2", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Bearer to", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Bearer t ok", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Basic tok", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Bearertok", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("tok", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("Bearer ", {"tok"}).has_value());
  EXPECT_FALSE(bearer_tenant("", {"tok"}).has_value());
}

TEST(bearer_tenant, names_the_token_the_header_carries) {
  const std::vector<std::string> tokens{"first-token", "second-token", "third"};
  EXPECT_EQ(bearer_tenant("Bearer first-token", tokens), std::optional<std::size_t>{0});
  EXPECT_EQ(bearer_tenant("bearer  second-token ", tokens),
            std::optional<std::size_t>{1});
  EXPECT_EQ(bearer_tenant("Bearer third", tokens), std::optional<std::size_t>{2});
  EXPECT_EQ(bearer_tenant("Bearer thirdthird", tokens), std::nullopt);
  EXPECT_EQ(bearer_tenant("Bearer second", tokens), std::nullopt);
  EXPECT_EQ(bearer_tenant("Basic third", tokens), std::nullopt);
  EXPECT_EQ(bearer_tenant("Bearer ", tokens), std::nullopt);
  EXPECT_EQ(bearer_tenant("Bearer third", {}), std::nullopt);
}

} // namespace
} // namespace canopy::server
