#pragma once
// Checking "Authorization: Bearer <token>" without a timing side channel.
// Thread contract: pure functions.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::server {

/// True when `candidate` equals `secret`. The time taken depends only on
/// candidate.size(), which the client chose: not on where the first difference is,
/// nor on the secret's length. `secret` must not be empty.
bool constant_time_equal(std::string_view candidate, std::string_view secret);

/// Which of `tokens` (none empty) the Authorization header value `authorization`
/// carries as "Bearer <token>" (scheme case-insensitive, RFC 7235; optional spaces
/// around the token), exactly, or none. Every token is compared, so the time taken
/// says nothing of which one matched, or how close a guess came.
std::optional<std::size_t> bearer_tenant(std::string_view authorization,
                                         const std::vector<std::string>& tokens);

} // namespace canopy::server
