#include "http_load/http_load_request.hpp"

#include <nlohmann/json.hpp>

#include <charconv>

namespace canopy::app {

namespace {

std::string common_headers(const http_load_options& o) {
  const bool ipv6 = o.target.host.find(':') != std::string::npos;
  std::string out = "Host: " + (ipv6 ? "[" + o.target.host + "]" : o.target.host) + ":" +
                    o.target.port + "\r\n";
  if (!o.auth_token.empty())
    out += "Authorization: Bearer " + o.auth_token + "\r\n";
  return out;
}

/// `n` in decimal, written in `digits`.
template <class Integer> std::string_view decimal(char (&digits)[24], Integer n) {
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  return {digits, static_cast<std::size_t>(end - digits)};
}

} // namespace

request_writer::request_writer(const http_load_options& options, http_payload payload,
                               const std::string& model) {
  const bool completions =
      payload == http_payload::completions || payload == http_payload::prefill;
  const char* route = completions                          ? "/v1/completions"
                      : payload == http_payload::next_byte ? "/v1/next_byte"
                                                           : "/v1/logprobs";
  head_ = std::string("POST ") + route + " HTTP/1.1\r\n" + common_headers(options) +
          "Accept: " +
          (payload == http_payload::binary ? "application/octet-stream"
                                           : "application/json") +
          "\r\nContent-Type: application/json\r\n";
  if (completions) {
    body_start_ = "{\"model\":" + nlohmann::json(model).dump() + ",\"prompt\":[";
    body_end_ = payload == http_payload::prefill
                    ? "],\"max_tokens\":1}"
                    : "],\"max_tokens\":0,\"echo\":true,\"logprobs\":0}";
  } else {
    body_start_ = "{\"tokens\":[";
    body_end_ = "]}";
  }
}

void request_writer::write(std::string& out,
                           const std::vector<std::int32_t>& tokens) const {
  out.assign(head_);
  out += "Content-Length: ";
  // The body's length is known only once it is written: write it after a placeholder
  // wide enough for any length, then move it up against the digits (a short memmove,
  // no allocation).
  const auto length_at = out.size();
  out.append(20, ' ');
  out += "\r\n\r\n";
  const auto body_at = out.size();
  char digits[24];
  out += body_start_;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i)
      out += ',';
    out += decimal(digits, tokens[i]);
  }
  out += body_end_;
  out.replace(length_at, 20, decimal(digits, out.size() - body_at));
}

std::string get_request(const http_load_options& options, std::string_view path) {
  return "GET " + std::string(path) + " HTTP/1.1\r\n" + common_headers(options) +
         "Accept: application/json\r\n\r\n";
}

} // namespace canopy::app
