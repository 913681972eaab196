#include <canopy/actors/cluster_auth.hpp>

#include <canopy/error.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace canopy::actors {

namespace {

std::string_view label(auth_role role) {
  return role == auth_role::node ? "canopy node proof" : "canopy front proof";
}

auth_bytes hmac(const std::string& secret, std::string_view label,
                const auth_bytes& first, const auth_bytes& second) {
  auth_bytes message(label.begin(), label.end());
  message.insert(message.end(), first.begin(), first.end());
  message.insert(message.end(), second.begin(), second.end());
  auth_bytes out(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
           message.size(), out.data(), &length) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  out.resize(length);
  return out;
}

std::uint64_t nonzero(const auth_bytes& bytes) {
  std::uint64_t token = 0;
  std::memcpy(&token, bytes.data(), sizeof token);
  return token == 0 ? 1 : token;
}

} // namespace

std::string read_cluster_secret(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw error(errc::invalid_config,
                "cluster_token_file " + path + ": cannot read a line");
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
    line.pop_back();
  if (line.empty())
    throw error(errc::invalid_config,
                "cluster_token_file " + path + ": the first line is empty");
  return line;
}

auth_bytes fresh_nonce() {
  auth_bytes nonce(32);
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    throw std::runtime_error("OpenSSL's random generator failed");
  return nonce;
}

auth_bytes auth_proof(const std::string& secret, auth_role role,
                      const auth_bytes& front_nonce, const auth_bytes& node_nonce) {
  return hmac(secret, label(role), front_nonce, node_nonce);
}

bool same_proof(const auth_bytes& a, const auth_bytes& b) {
  return a.size() == b.size() && !a.empty() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::uint64_t session_token(const std::string& secret, const auth_bytes& front_nonce,
                            const auth_bytes& node_nonce) {
  return nonzero(hmac(secret, "canopy session", front_nonce, node_nonce));
}

std::uint64_t random_session_token() {
  return nonzero(fresh_nonce());
}

bool is_loopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

} // namespace canopy::actors
