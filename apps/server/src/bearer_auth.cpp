#include "bearer_auth.hpp"

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

bool bearer_authorized(std::string_view authorization, std::string_view token) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() < scheme.size())
    return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i])
      return false;
  auto credentials = authorization.substr(scheme.size());
  // Optional whitespace around the token is not part of it.
  auto first = credentials.find_first_not_of(' ');
  if (first == std::string_view::npos)
    return false;
  credentials = credentials.substr(first, credentials.find_last_not_of(' ') - first + 1);
  return constant_time_equal(credentials, token);
}

} // namespace canopy::server
