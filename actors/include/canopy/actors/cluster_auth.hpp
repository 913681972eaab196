#pragma once
// Cluster authentication between fronts and worker nodes: a shared secret (the first
// line of cluster_token_file) that never crosses the wire. Each side sends a fresh
// random nonce and proves the secret with HMAC-SHA256 over both nonces, labelled by
// its role so that a proof cannot be reflected back; the session token both then use
// is a third HMAC of the same nonces. Without TLS, anyone who watches the wire sees
// nonces and proofs, never the secret; use TLS (tls_*) across untrusted networks.
// Thread contract: pure functions (fresh_nonce reads OpenSSL's thread-safe RNG).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::actors {

using auth_bytes = std::vector<std::uint8_t>;

/// The secret in `path`: its first line without trailing whitespace. Throws
/// canopy::error(errc::invalid_config) naming the file when it cannot be read or the
/// line is empty.
std::string read_cluster_secret(const std::string& path);

/// 32 bytes from OpenSSL's CSPRNG.
auth_bytes fresh_nonce();

/// Who proves: the node answers a hello, the front answers the node's challenge.
enum class auth_role { node, front };

/// HMAC-SHA256(secret, role label | front nonce | node nonce).
auth_bytes auth_proof(const std::string& secret, auth_role role,
                      const auth_bytes& front_nonce, const auth_bytes& node_nonce);

/// Compares two proofs in time independent of where they differ.
bool same_proof(const auth_bytes& a, const auth_bytes& b);

/// The session token both sides derive from the nonces (never 0).
std::uint64_t session_token(const std::string& secret, const auth_bytes& front_nonce,
                            const auth_bytes& node_nonce);

/// A random session token (never 0), for a node without a secret.
std::uint64_t random_session_token();

/// True for 127.0.0.0/8, ::1 and "localhost": addresses only this machine reaches.
bool is_loopback(std::string_view host);

} // namespace canopy::actors
