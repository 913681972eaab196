#pragma once
// The settings of `canopy serve` that are not engine settings: where to listen, who
// may talk, and the limits that keep a hostile or broken client from hurting others.
// Thread contract: plain value.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace canopy::server {

/// "http://HOST:PORT", with an IPv6 host in brackets.
std::string server_url(const std::string& host, std::uint16_t port);

struct server_options {
  std::string host = "127.0.0.1"; // loopback unless told otherwise
  std::uint16_t port = 8080;      // 0: any free port (the server reports it)
  std::vector<std::string>
      auth_tokens;                   // none: no auth; else "Authorization: Bearer <one>",
                                     // and with several each is a tenant, whose
                                     // requests share no cache entry with another's
  std::uint32_t io_threads = 1;      // Asio threads running the connections
  std::uint32_t handler_threads = 2; // threads that parse and tokenize request bodies
                                     // (off the I/O threads: a 15 MB text must not
                                     // stall /healthz)
  std::size_t max_body_bytes = 16u << 20;   // larger bodies: 413, before reading them
  std::size_t max_header_bytes = 16u << 10; // larger header sections: 431
  std::chrono::milliseconds header_timeout{10000}; // whole header section must arrive
                                                   // within this (slowloris): 408
  std::chrono::milliseconds body_timeout{60000};   // and the body within this: 408
  std::chrono::milliseconds idle_timeout{120000};  // keep-alive connection with no
                                                   // request for this long is closed
  std::chrono::milliseconds write_stall_timeout{10000}; // a connection whose answer's
                                                        // write makes no progress for
                                                        // this long is closed (a client
                                                        // that stopped reading)
  std::chrono::milliseconds drain_timeout{10000};       // after a stop (SIGTERM), answers
                                                  // in flight get this long; then every
                                                  // connection is closed (a second
                                                  // signal closes them at once)
  std::size_t max_connections = 10000;         // further connections are closed at once
  std::size_t max_batch = 1024;                // sequences in one request
  std::size_t max_rows = 16384;                // log-prob rows in one response
  std::size_t max_answer_bytes = 256u << 20;   // one answer, encoded, at most: a request
                                               // whose answer could be larger gets 413
                                               // before anything is computed
  std::size_t answer_budget_bytes = 1u << 30;  // answers being computed or written, all
                                               // connections: past it, 503
  std::size_t body_budget_bytes = 256u << 20;  // request bodies being read, all
                                               // connections: past it, 503
  std::size_t max_sample_tokens = 4096;        // max_tokens of one sample request (and
                                               // of a completion)
  std::size_t max_generated_tokens = 1u << 18; // prompts x n x max_tokens of one
                                               // sample or completion request: 400
  std::size_t generation_budget_tokens = 1u << 20; // those of every request in flight:
                                                   // past it, 503
  std::string served_model_name; // the OpenAI routes' model id; empty: the
                                 // model's file or folder name
  bool web_page = true;          // the page at / (web_page.hpp); false: the API alone
};

/// Bytes a connection asks of one socket read (big bodies come this many at a time).
inline constexpr std::size_t read_chunk_bytes = 16u << 10;

/// What one open connection can hold at most beyond the budgets: its read buffer
/// (a header section and one read), the HTTP parser and socket state.
std::size_t connection_bytes_bound(const server_options& options);

/// The most memory the HTTP side of a server can hold, on top of the engine (its model
/// and its cache budgets): the answer and body budgets and every connection allowed.
/// docs/http-api.md: "Memory a client can make the server hold".
std::size_t server_memory_bound(const server_options& options);

} // namespace canopy::server
