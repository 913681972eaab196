#pragma once
// The cluster token's challenge-response on the raw connection between a front and a
// worker node, before any byte reaches CAF's BASP parser. CAF 0.17's BASP sizes the read
// that follows a peer's 32-byte header from that header's payload_len before any
// handshake, so a stranger who could speak BASP could make a node allocate 4 GiB per
// connection; behind this gate a node reads 64 bytes at most from a peer that has not
// proved the secret, and drops it at the first wrong byte.
//   node -> front: magic (15 bytes) | 1 if it has a secret, else 0 | node nonce (32)
//   front -> node: front nonce (32) | the front's proof (32)
//   node -> front: the node's proof (32)
// Proofs are cluster_auth's auth_proof over both nonces, so each side proves the secret
// to the other (a front never speaks BASP to an impostor). A node without a secret
// (loopback only) runs the same exchange with the empty secret, and says so, so that a
// front and a node that disagree on having one fail here, each saying which has none.
// Thread contract: one object per connection, used by one thread at a time.

#include <canopy/actors/cluster_auth.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace canopy::actors {

class connection_gate {
public:
  using bytes = std::vector<char>;

  connection_gate(auth_role side, std::string secret);

  /// What this side sends when the connection opens (the node's challenge; nothing for
  /// a front, which speaks second).
  bytes opening();
  /// How many bytes the gate reads next: exactly that many; 0 once passed or failed.
  std::size_t wanted() const;
  /// Takes the `wanted()` bytes read; returns what to send in answer (maybe nothing).
  /// Afterwards passed(), failed(), or wanted() > 0 again.
  bytes take(const char* data, std::size_t size);

  bool passed() const { return stage_ == stage::passed; }
  bool failed() const { return stage_ == stage::failed; }
  /// Why it failed, naming the peer as "the node" or "the peer" ("" unless failed()).
  const std::string& failure() const { return failure_; }
  /// Why a connection that closed now, before the gate passed or failed, did not pass.
  std::string why_closed() const;

  /// The magic that opens a node's challenge (then its secret flag).
  static constexpr char magic[] = "canopy-gate/1\0";
  static constexpr std::size_t magic_size = 15;
  static constexpr std::size_t nonce_size = 32;
  static constexpr std::size_t proof_size = 32;

private:
  enum class stage { challenge, answer, confirmation, passed, failed };

  bytes fail(std::string why);

  auth_role side_;
  std::string secret_;
  stage stage_;
  auth_bytes front_nonce_;
  auth_bytes node_nonce_;
  std::string failure_;
};

} // namespace canopy::actors
