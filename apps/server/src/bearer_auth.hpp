#pragma once
// Checking "Authorization: Bearer <token>" without a timing side channel.
// Thread contract: pure functions.

#include <string_view>

namespace canopy::server {

/// True when `candidate` equals `secret`. The time taken depends only on
/// candidate.size(), which the client chose: not on where the first difference is,
/// nor on the secret's length. `secret` must not be empty.
bool constant_time_equal(std::string_view candidate, std::string_view secret);

/// True when the Authorization header value `authorization` is "Bearer <token>"
/// (scheme case-insensitive, RFC 7235) with exactly `token`. `token` must not be
/// empty.
bool bearer_authorized(std::string_view authorization, std::string_view token);

} // namespace canopy::server
