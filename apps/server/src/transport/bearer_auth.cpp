#include "transport/bearer_auth.hpp"

#include <cctype>
#include <cstddef>

namespace canopy::server {

bool constant_time_equal(std::string_view candidate, std::string_view secret) {
  // Every candidate byte is compared with a secret byte (cycling through the secret),
  // and differences are OR-ed rather than returned early. `volatile` keeps the
  // compiler from turning the loop back into an early exit.
  volatile unsigned char diff = candidate.size() != secret.size() ? 1 : 0;
  for (std::size_t i = 0; i < candidate.size(); ++i)
    diff = diff | static_cast<unsigned char>(candidate[i] ^ secret[i % secret.size()]);
  return diff == 0;
}

namespace {

/// The token of a "Bearer <token>" header value, without the optional whitespace
/// around it; none for another scheme or no token.
std::optional<std::string_view> bearer_credentials(std::string_view authorization) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() < scheme.size())
    return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i])
      return std::nullopt;
  auto credentials = authorization.substr(scheme.size());
  auto first = credentials.find_first_not_of(' ');
  if (first == std::string_view::npos)
    return std::nullopt;
  return credentials.substr(first, credentials.find_last_not_of(' ') - first + 1);
}

} // namespace

std::optional<std::size_t> bearer_tenant(std::string_view authorization,
                                         const std::vector<std::string>& tokens) {
  const auto credentials = bearer_credentials(authorization);
  if (!credentials)
    return std::nullopt;
  std::optional<std::size_t> match;
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (constant_time_equal(*credentials, tokens[i]))
      match = i;
  return match;
}

} // namespace canopy::server
