// The cluster token's challenge-response before BASP (see connection_gate.hpp).
#include <canopy/actors/connection_gate.hpp>

#include <algorithm>
#include <cstring>

namespace canopy::actors {

namespace {

void append(connection_gate::bytes& out, const auth_bytes& in) {
  out.insert(out.end(), in.begin(), in.end());
}

auth_bytes slice(const char* data, std::size_t size) {
  const auto* first = reinterpret_cast<const std::uint8_t*>(data);
  return auth_bytes(first, first + size);
}

} // namespace

connection_gate::connection_gate(auth_role side, std::string secret)
    : side_(side), secret_(std::move(secret)),
      stage_(side == auth_role::node ? stage::answer : stage::challenge) {}

connection_gate::bytes connection_gate::opening() {
  if (side_ != auth_role::node)
    return {};
  node_nonce_ = fresh_nonce();
  bytes out(magic, magic + magic_size);
  out.push_back(secret_.empty() ? 0 : 1);
  append(out, node_nonce_);
  return out;
}

std::size_t connection_gate::wanted() const {
  switch (stage_) {
  case stage::challenge:
    return magic_size + 1 + nonce_size;
  case stage::answer:
    return nonce_size + proof_size;
  case stage::confirmation:
    return proof_size;
  default:
    return 0;
  }
}

connection_gate::bytes connection_gate::take(const char* data, std::size_t size) {
  if (size != wanted() || size == 0)
    return fail("read " + std::to_string(size) + " bytes where the gate wanted " +
                std::to_string(wanted()));
  switch (stage_) {
  case stage::challenge: { // the front reads the node's challenge
    if (std::memcmp(data, magic, magic_size) != 0 || (data[magic_size] & ~1) != 0)
      return fail("did not open with canopy's cluster handshake (not a canopy worker "
                  "node of this protocol)");
    const bool node_has_secret = data[magic_size] == 1;
    if (node_has_secret && secret_.empty())
      return fail(
          "requires a cluster token and this front has none (cluster_token_file)");
    if (!node_has_secret && !secret_.empty())
      return fail("has no cluster token and this front requires one");
    node_nonce_ = slice(data + magic_size + 1, nonce_size);
    front_nonce_ = fresh_nonce();
    bytes out;
    append(out, front_nonce_);
    append(out, auth_proof(secret_, auth_role::front, front_nonce_, node_nonce_));
    stage_ = stage::confirmation;
    return out;
  }
  case stage::answer: { // the node checks the front's proof and proves itself
    front_nonce_ = slice(data, nonce_size);
    const auto proof = slice(data + nonce_size, proof_size);
    if (!same_proof(proof,
                    auth_proof(secret_, auth_role::front, front_nonce_, node_nonce_)))
      return fail("could not prove the cluster token (the tokens differ)");
    stage_ = stage::passed;
    bytes out;
    append(out, auth_proof(secret_, auth_role::node, front_nonce_, node_nonce_));
    return out;
  }
  case stage::confirmation: { // the front checks the node's proof
    if (!same_proof(slice(data, proof_size),
                    auth_proof(secret_, auth_role::node, front_nonce_, node_nonce_)))
      return fail("could not prove the cluster token (the tokens differ)");
    stage_ = stage::passed;
    return {};
  }
  default:
    return fail("the gate was already " + std::string(passed() ? "passed" : "closed"));
  }
}

std::string connection_gate::why_closed() const {
  switch (stage_) {
  case stage::challenge:
    return "closed the connection before its cluster handshake (not a canopy worker "
           "node, "
           "or it is leaving)";
  case stage::confirmation: // a node closes when the front's proof is wrong
    return "refused this front's proof: this front could not prove the cluster token "
           "(the tokens differ)";
  case stage::answer:
    return "closed the connection before proving the cluster token";
  default:
    return {};
  }
}

connection_gate::bytes connection_gate::fail(std::string why) {
  stage_ = stage::failed;
  failure_ = std::move(why);
  return {};
}

} // namespace canopy::actors
