#pragma once
// A request's cache partition (messages::query::partition): the tenant its bearer
// token names, on a server with several tokens, and the request's own "cache_salt".
// Requests share cached rows, KV and computations only when both agree, so no tenant,
// and no caller with a salt of its own, can tell from a response's timing what
// another has asked (a hit answers about ten times faster than a miss).
// Thread contract: pure functions.

#include <cstddef>
#include <string>
#include <string_view>

namespace canopy::server {

/// The longest cache_salt a request may give.
inline constexpr std::size_t max_cache_salt_bytes = 256;

/// The partition of a request by `tenant` ("" on a server with one token or none; else
/// digits) with `salt` ("" when it gave none): "" (the shared partition) when both are
/// empty, else tenant, a newline, salt. No tenant holds a newline, so two different
/// pairs never name one partition.
std::string cache_partition(std::string_view tenant, std::string_view salt);

/// What every partition of `tenant` starts with, and no other's: what its
/// /v1/cache/clear drops. "" (every partition) without tenants.
std::string tenant_partitions(std::string_view tenant);

} // namespace canopy::server
