// canopy serve: the engine over HTTP/1.1 (docs/http-api.md: "HTTP API"). The engine runs
// inside this program's own actor system (the host-system form), next to the gateway
// actors that turn requests into engine queries; Asio threads run the connections.

#include "cli_args.hpp"
#include "commands.hpp"
#include "open_file_limit.hpp"
#include "option_table.hpp"

#include <canopy/actor_system_setup.hpp>
#include <canopy/engine.hpp>
#include <canopy/server/api/api_router.hpp>
#include <canopy/server/api/gateway_actor.hpp>
#include <canopy/server/transport/http_server.hpp>
#include <canopy/server/web/web_page.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

namespace canopy::app {

namespace {

const char* const usage =
    "Usage: canopy serve [--host H] [--port P] [--auth-token-file F] [options]\n"
    "                    [engine settings]\n\n"
    "Serves the engine over HTTP/1.1 (docs/http-api.md: \"HTTP API\"): POST "
    "/v1/logprobs,\n"
    "/v1/sample, /v1/completions, /v1/tokenize, /v1/detokenize, /v1/cache/kv,\n"
    "/v1/cache/clear; GET /v1/vocab, /v1/tokenizer/merges, "
    "/v1/tokenizer/chat_templates,\n"
    "/v1/model, /v1/models, /healthz, /metrics; and a page at / to explore them in a\n"
    "browser (--no-web-page: the API alone).\n"
    "Prints 'canopy serve: listening on http://HOST:PORT' once it accepts connections.\n"
    "SIGTERM or SIGINT: stops accepting, answers what is in flight (for\n"
    "--drain-timeout-ms at most; a second signal: at once), exits 0.\n";

/// The options that set server_options members, read by the table; --auth-token-file
/// (a file to load) and --gateways (engine side) are read by hand.
const option_table<server::server_options>& serve_options() {
  using o = server::server_options;
  constexpr auto bytes = shown_as::bytes;
  static const auto table =
      option_table<o>()
          .text("host", "H", "address to bind", &o::host, "this machine only")
          .count("port", "P", "port to bind", &o::port, 0, shown_as::plain,
                 "0: any free port, printed")
          .other({"auth-token-file", "FILE",
                  "require 'Authorization: Bearer <token>' on every request but GET "
                  "/healthz, with a token of the file (one per line; with several, each "
                  "is a tenant, and tenants share no cache entry)"})
          .count("io-threads", "N", "threads running the connections", &o::io_threads, 1)
          .count("handler-threads", "N",
                 "threads that parse and tokenize request bodies, off the connections'",
                 &o::handler_threads, 1)
          .other({"gateways", "N",
                  "gateway actors turning requests into queries (default: cores)"})
          .count("max-body-bytes", "N", "larger request bodies get 413 unread",
                 &o::max_body_bytes, 1, bytes)
          .count("max-header-bytes", "N", "larger header sections get 431",
                 &o::max_header_bytes, 256, bytes)
          .milliseconds("header-timeout-ms", "a header section must arrive within this",
                        &o::header_timeout)
          .milliseconds("body-timeout-ms", "a body must arrive within this",
                        &o::body_timeout)
          .milliseconds("idle-timeout-ms",
                        "an idle keep-alive connection is closed after", &o::idle_timeout)
          .milliseconds("write-stall-timeout-ms",
                        "a connection whose answer's write makes no progress this long "
                        "is closed",
                        &o::write_stall_timeout)
          .milliseconds("drain-timeout-ms",
                        "after SIGTERM, answers in flight get this long before every "
                        "connection is closed",
                        &o::drain_timeout, "a second signal closes them at once")
          .count("max-connections", "N", "connections beyond this are closed at once",
                 &o::max_connections, 1)
          .count("max-batch", "N", "sequences in one request", &o::max_batch, 1)
          .count("max-rows", "N", "log-prob rows in one answer", &o::max_rows, 1)
          .count("max-answer-bytes", "N",
                 "bytes one answer may take, encoded; larger ones get 413 before "
                 "computing",
                 &o::max_answer_bytes, 1, bytes)
          .count("answer-budget-bytes", "N",
                 "bytes all answers being computed or written may take; past it, 503",
                 &o::answer_budget_bytes, 1, bytes)
          .count("body-budget-bytes", "N",
                 "bytes all request bodies being read may take; past it, 503",
                 &o::body_budget_bytes, 1, bytes)
          .count("max-sample-tokens", "N", "max_tokens of one sample request",
                 &o::max_sample_tokens, 1)
          .count("max-generated-tokens", "N",
                 "prompts x n x max_tokens of one sample or completion request",
                 &o::max_generated_tokens, 1)
          .count("generation-budget-tokens", "N",
                 "those of every sample and completion in flight; past it, 503",
                 &o::generation_budget_tokens, 1)
          .text("served-model-name", "NAME",
                "the model's id in the OpenAI routes (/v1/models, /v1/completions' "
                "\"model\")",
                &o::served_model_name, "the model's file or folder name")
          .other({"no-web-page", "",
                  "serve the API alone, without the page at / (docs/web-page.md)"});
  return table;
}

/// Fewer characters than this in an auth token get a warning at start.
constexpr std::size_t min_auth_token_chars = 16;

/// The tokens of the file, one per line, in order: a line's surrounding whitespace (an
/// editor's newline, a stray space) is no part of a token a client could send, and
/// blank lines are skipped. Tenant N is the N-th token.
std::vector<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw usage_error("--auth-token-file " + path + ": cannot read the file");
  std::vector<std::string> tokens;
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && space(line.back()))
      line.pop_back();
    line.erase(line.begin(), std::find_if_not(line.begin(), line.end(), space));
    if (line.empty())
      continue;
    if (std::find(tokens.begin(), tokens.end(), line) != tokens.end())
      throw usage_error("--auth-token-file " + path + ": token " +
                        std::to_string(tokens.size() + 1) +
                        " repeats an earlier one (each token is a tenant of its own)");
    tokens.push_back(std::move(line));
  }
  if (tokens.empty())
    throw usage_error("--auth-token-file " + path + ": the file holds no token");
  return tokens;
}

server::server_options options_from(const parsed_args& args) {
  server::server_options o;
  serve_options().apply(args, o);
  if (args.has("auth-token-file"))
    o.auth_tokens = read_token_file(args.text("auth-token-file", ""));
  o.web_page = !args.has("no-web-page");
  return o;
}

// Only this machine can reach it (a name is taken at its word only for "localhost").
bool loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::size_t core_count() {
  return std::max(2u, std::thread::hardware_concurrency());
}

} // namespace

int serve_command(const std::vector<std::string>& argv) {
  const auto args = parse_command_line(argv, usage, serve_options().flags());
  if (args.help)
    return 0;
  const auto options = options_from(args);
  if (options.auth_tokens.empty() && !loopback_host(options.host))
    std::cerr << "canopy serve: WARNING: listening on " << options.host
              << " with no --auth-token-file: anyone who can reach this port can use the "
                 "engine\n";
  // A short token is guessed: a client may try many per second, unthrottled.
  for (std::size_t i = 0; i < options.auth_tokens.size(); ++i)
    if (options.auth_tokens[i].size() < min_auth_token_chars)
      std::cerr << "canopy serve: WARNING: auth token " << i + 1 << " has "
                << options.auth_tokens[i].size()
                << " characters; one that is not guessed has " << min_auth_token_chars
                << " or more random ones (openssl rand -hex 16)\n";
  const auto gateway_count = args.count("gateways", core_count(), 1);
  // A client that closes its socket mid-answer must not kill the server.
  std::signal(SIGPIPE, SIG_IGN);
  // Room for every connection allowed, plus the model's files and the engine's own.
  const auto descriptors = raise_open_file_limit(options.max_connections + 256);
  if (descriptors < options.max_connections + 64)
    std::cerr << "canopy serve: warning: the open-file limit is " << descriptors
              << ", so fewer than --max-connections " << options.max_connections
              << " connections can be open at once\n";

  caf::actor_system_config system_config;
  configure_actor_system(system_config, args.config, front_role(args.config));
  auto threads =
      args.config.scheduler_threads ? args.config.scheduler_threads : core_count();
  system_config.set("scheduler.max-threads", static_cast<std::size_t>(threads));
  // Note [scheduler wake-up]: an idle CAF worker polls its queue 100 times, then
  // polls with 50 us sleeps for 25 ms, then waits on a condition variable that a new
  // job signals. A request arriving from an I/O thread in the sleeping phase waits out
  // a sleep (~60 us with timer slack): most of the server's overhead per request.
  // Here a worker polls busily ~100x longer (about a millisecond), then waits on the
  // condition variable: an idle server still costs no CPU, and a steady stream of
  // requests finds a worker awake. Measured with `canopy bench --target` on
  // stories260K cache hits, binary, one connection (2 cores, noisy): overhead p50
  // 124-153 us with CAF's defaults, 52-58 us with these.
  system_config.set("work-stealing.aggressive-poll-attempts", std::size_t{10000});
  system_config.set("work-stealing.moderate-poll-attempts", std::size_t{0});
  caf::actor_system system{system_config};
  {
    engine lm{system, args.config};
    std::vector<server::gateway_actor> gateways;
    for (std::size_t i = 0; i < gateway_count; ++i)
      gateways.push_back(server::spawn_gateway(system, lm.handle()));
    auto metrics = std::make_shared<server::server_metrics>();
    server::api_router router{lm, gateways, metrics, options};
    server::web_page page{router};
    server::http_server http{
        options, options.web_page ? static_cast<server::request_handler&>(page) : router,
        metrics};
    const auto& model = lm.model();
    std::cout << "canopy serve: model " << model.name << " (vocab " << model.vocab_size
              << ", context " << model.context_length << ")\n"
              << "canopy serve: listening on "
              << server::server_url(options.host, http.port()) << std::endl;
    http.run();
    for (const auto& g : gateways)
      caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
  }
  std::cerr << "canopy serve: stopped\n";
  return 0;
}

} // namespace canopy::app
