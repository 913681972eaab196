#pragma once
// One keep-alive HTTP/1.1 connection of the load generator, sending POST /v1/logprobs
// back to back: each answer's arrival is checked, recorded and followed at once by the
// next request. Asio async I/O, no blocking and, once warm, no allocation per request.
// Thread contract: every connection of a phase, the phase and its tally are used on
// the one thread running their io_context; nothing is locked.

#include "http_load/http_load_request.hpp"
#include "http_load/http_load_response.hpp"
#include "http_load/http_load_tally.hpp"
#include "http_load/http_load_workloads.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace canopy::app {

/// What every connection of one phase of a run shares.
struct load_phase {
  const request_writer& writer;
  http_payload payload;
  std::size_t vocab;                // of the served model: the size of a valid row
  bool engine_timed;                // answers carry Server-Timing (Canopy); another
                                    // server's count no engine time
  load_clock::time_point stop_at;   // no request starts after this
  boost::asio::steady_timer& limit; // fires when requests in flight are given up
  load_tally& tally;
  std::size_t running = 0; // connections still sending (set before any starts);
                           // the last to stop cancels `limit`
};

class load_connection {
public:
  explicit load_connection(boost::asio::ip::tcp::socket socket);
  load_connection(const load_connection&) = delete;
  load_connection& operator=(const load_connection&) = delete;

  /// False once it failed (an I/O error, the server closing it: counted as one error).
  bool is_open() const { return socket_.is_open(); }
  /// Sends `source`'s requests until it runs dry or phase.stop_at passes, then
  /// decrements phase.running. Only on an open connection.
  void start(load_phase& phase, request_source& source);
  /// Closes the socket: a request in flight fails as unanswered (phase.limit fired).
  void abandon();

private:
  void send_next();
  void read_answer();
  void on_answer(boost::system::error_code ec, std::size_t bytes);
  void fail(const char* doing, boost::system::error_code ec);
  void close();
  void stop();

  boost::asio::ip::tcp::socket socket_;
  load_phase* phase_ = nullptr;
  request_source* source_ = nullptr;
  const token_ids* tokens_ = nullptr; // of the request in flight
  load_clock::time_point sent_at_;
  bool abandoned_ = false;
  std::string request_;                   // reused for every request
  std::string body_;                      // reused for every answer
  boost::beast::flat_buffer buffer_;      // bytes read past an answer stay here
  std::optional<response_reader> reader_; // one per answer
};

/// `count` connections to `target`, connected before any is used (so that connection
/// setup is not measured). Throws std::runtime_error naming the target and the reason
/// when one cannot connect within `timeout`.
std::vector<boost::asio::ip::tcp::socket> connect_all(boost::asio::io_context& io,
                                                      const http_target& target,
                                                      std::size_t count,
                                                      std::chrono::seconds timeout);

} // namespace canopy::app
