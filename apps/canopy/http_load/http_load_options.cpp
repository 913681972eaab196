#include "http_load/http_load_options.hpp"

#include "option_table.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <initializer_list>

namespace canopy::app {

namespace {

const char* const target_form = "expected http://HOST:PORT, e.g. http://127.0.0.1:8080";

/// 0 when `text` is not a decimal integer (0 itself is refused wherever this is used).
std::uint64_t parse_positive(std::string_view text) {
  std::uint64_t n = 0;
  const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc{} && stop == text.data() + text.size() ? n : 0;
}

http_target parse_target(const std::string& url) {
  const std::string_view scheme = "http://";
  std::string_view rest = url;
  if (rest.substr(0, scheme.size()) != scheme)
    throw usage_error("--target " + url + ": " + target_form +
                      " (only plain http is spoken)");
  rest.remove_prefix(scheme.size());
  if (!rest.empty() && rest.back() == '/')
    rest.remove_suffix(1);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || rest.find('/') != std::string_view::npos)
    throw usage_error("--target " + url + ": " + target_form);
  std::string_view host = rest.substr(0, colon);
  const std::string_view port = rest.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port_number = parse_positive(port);
  if (host.empty() || port_number == 0 || port_number > 65535)
    throw usage_error("--target " + url + ": " + target_form);
  return {std::string(scheme) + std::string(rest), std::string(host), std::string(port)};
}

/// The first line of the file, as the server reads its own token file.
std::string read_token(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw usage_error("--auth-token-file " + path + ": cannot read a line from the file");
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  if (line.empty())
    throw usage_error("--auth-token-file " + path + ": the first line is empty");
  return line;
}

} // namespace

std::string_view to_string(http_workload w) {
  return name_of(http_workload_names, w);
}

std::string_view to_string(http_payload p) {
  return name_of(http_payload_names, p);
}

const option_table<http_load_options>& http_load_table() {
  using o = http_load_options;
  static const auto table =
      option_table<o>()
          .other({"target", "URL",
                  "the running `canopy serve` to measure: http://HOST:PORT"})
          .enum_list("workload", "hits, misses, comma-separated", http_workload_names,
                     &o::workloads)
          .enum_list(
              "payload",
              "json, binary (POST /v1/logprobs), completions (POST /v1/completions "
              "scoring every prompt token), prefill (POST /v1/completions, one "
              "token generated, no scores), next_byte (POST /v1/next_byte), "
              "comma-separated",
              http_payload_names, &o::payloads)
          .count_list("connections",
                      "keep-alive connections of each run, comma-separated",
                      &o::connections)
          .number("duration-s", "S", "seconds each run sends requests", &o::duration_s)
          .count("sequence-length", "L", "tokens per request", &o::sequence_length, 1)
          .count("sequences", "S", "hits: sequences warmed, then asked for at random",
                 &o::hit_sequences, 1)
          .count("seed", "S", "seed of the hits set and its choices", &o::seed)
          .other({"auth-token-file", "F",
                  "send 'Authorization: Bearer <the file's first line>'"})
          .count("vocab-size", "V",
                 "measure a server without GET /v1/model (another OpenAI server, with "
                 "the completions payloads): random tokens are drawn below V",
                 &o::vocab_size, 0, shown_as::plain, "0: the served model's, read there")
          .on_off("json", "print one JSON document instead of the table", &o::json);
  return table;
}

std::vector<flag_spec> http_load_flags() {
  return http_load_table().flags();
}

http_load_options http_load_options_of(const parsed_args& args) {
  http_load_options o;
  http_load_table().apply(args, o);
  o.target = parse_target(args.text("target", ""));
  if (!(o.duration_s > 0))
    throw usage_error("--duration-s: must be more than 0");
  if (args.has("auth-token-file"))
    o.auth_token = read_token(args.text("auth-token-file", ""));
  return o;
}

} // namespace canopy::app
