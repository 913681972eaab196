#pragma once
// One HTTP/1.1 connection. It reads requests under the transport's limits (header
// bytes and time, body bytes and time, auth), hands each complete one to the
// request_handler, writes the answers back in request order, and closes when the
// client leaves, a deadline passes, an error answer was written or the server drains.
// A streamed answer (http_response::stream) goes out piece by piece as the handler
// produces it. See Note [connection states] in http_session.cpp.
// Thread contract: start() and drain() from any thread; everything else runs on the
// connection's strand. The respond callbacks it gives out may be called from any
// thread, even after the server is gone (they reach it through the post_gate).

#include "transport/expiry_timer.hpp"
#include "transport/transport_context.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace canopy::server {

class http_session : public std::enable_shared_from_this<http_session> {
public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  using socket = boost::asio::ip::tcp::socket::rebind_executor<strand>::other;

  http_session(socket peer, transport_context& context);
  ~http_session();
  http_session(const http_session&) = delete;
  http_session& operator=(const http_session&) = delete;

  /// Registers with the context's connection_registry and starts reading.
  void start();
  /// The server drains: finish the request in flight (if any), then close.
  void drain();
  /// The server stops now: close, cancelling the request in flight.
  void abort();
  /// The drain's time is up: as abort, but a chunked stream first ends properly with
  /// its cut piece (http_response::stream_cut), given cut_grace to be written.
  void cut();

private:
  using clock = std::chrono::steady_clock;
  using error_code = boost::system::error_code;

  // Where the request being read stands, or what the connection does instead.
  enum class phase { waiting, header, body, complete, failed, lingering };
  // What read_deadline_ guards.
  enum class deadline { none, idle, header, body, linger };

  // What writing a response and counting it need to know about its request.
  struct exchange {
    request_id id = 0; // 0: answered by the transport itself
    std::string target;
    unsigned version = 11;
    bool keep_alive = false;
    clock::time_point read_done;
    std::size_t body_in = 0;
  };

  void advance();
  void progress();
  void parse();
  void on_header();
  void fail(http_response response);
  void dispatch();
  void start_request();
  /// Runs work(session) on the session's strand, from any thread, if the server and
  /// the session are still there (through the post_gate).
  template <class Work>
  static void hand_off(const std::shared_ptr<post_gate>& gate,
                       const std::weak_ptr<http_session>& weak, Work work);
  respond_fn responder(request_id id);
  void on_response(request_id id, http_response response);
  /// Writes a streamed answer's head and first piece; the rest as it comes.
  void begin_stream(http_response head);
  void write_stream();
  void on_stream_written(error_code ec, std::size_t bytes);
  /// The stream has ended and is written: the request is answered.
  void end_stream();
  void write(exchange done, http_response response);
  void write_continue();
  /// While a half-closed HTTP/1.1 client's request is computed, sends it "100
  /// Continue" every departure_probe_interval: a client that merely half-closed reads
  /// past them; one that left makes the second write fail, and the request is
  /// cancelled (Note [departed clients] in the source).
  void probe_departure();
  void start_write();
  void write_some();
  void on_written_some(error_code ec);
  /// Holds the body being read (its Content-Length up front, or what has come of a
  /// chunked one) against the budget every connection shares; false after failing
  /// the request with 503.
  bool reserve_body();
  /// `done`'s answer is written whole (`body_bytes` of body with `status`): counts it,
  /// then closes (not keep-alive) or goes on with the next request.
  void answered(exchange done, int status, std::size_t body_bytes);
  void finish();
  void read();
  void on_read(error_code ec, std::size_t bytes);
  deadline wanted_deadline() const;
  void update_deadline();
  void on_deadline();
  void close_now();

  transport_context& context_;
  const strand strand_;
  socket socket_;
  expiry_timer<strand> read_deadline_;  // armed_ for the read side
  expiry_timer<strand> write_deadline_; // a write that makes no progress
  expiry_timer<strand> probe_;          // the next departure probe
  expiry_timer<strand> cut_deadline_;   // a cut stream's last piece, written by then

  // Bytes read and not yet given to the parser are [parsed_, size()). It is only
  // consumed while no read is pending (a read fills its prepared tail).
  boost::beast::flat_buffer buffer_;
  std::size_t parsed_ = 0;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>>
      parser_;
  phase phase_ = phase::waiting;
  std::uint64_t request_seq_ = 0; // parsers started, so each request gets own deadlines
  clock::time_point read_done_;   // of the complete request not yet dispatched
  std::string tenant_;            // of the request being read (http_request::tenant)

  std::optional<exchange> in_flight_; // handed to the handler, not answered yet
  // An answer that came while a departure probe was being written: written after it.
  std::optional<std::pair<exchange, http_response>> after_probe_;
  // The connection itself while a request is in flight. Its respond callback holds it
  // weakly (it may come after the server is gone), and with the read buffer full no
  // read or timer may hold it either: without this it would vanish, and its socket
  // close with a reset, before the answer (Note [connection states]).
  std::shared_ptr<http_session> keep_for_answer_;
  // While a request is in flight the io_context must not run out of work, even with
  // no read pending (drain, full buffer).
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      work_;
  std::optional<std::pair<exchange, http_response>> pending_error_; // after in_flight_
  boost::beast::http::response<boost::beast::http::string_body> response_; // writing
  std::optional<boost::beast::http::response_serializer<boost::beast::http::string_body>>
      serializer_;                  // of response_
  std::optional<exchange> written_; // of response_; empty while "100 Continue" goes out
  std::shared_ptr<byte_reservation> response_reserved_; // response_'s, till written

  // The streamed answer being written (of in_flight_, which stays until it ends).
  struct stream_state {
    std::shared_ptr<body_stream> source;
    bool chunked = true; // HTTP/1.1; HTTP/1.0 gets the bytes unframed, then a close
    bool ended = false;  // the handler ended it: `outgoing` holds its last bytes
    int status = 200;
    std::string outgoing; // framed bytes not yet written
    std::size_t body_bytes = 0;
    std::string cut_piece; // written last when the server cuts the stream
    bool cutting = false;  // cut(): no more pieces from the handler
  };
  std::optional<stream_state> stream_;
  byte_reservation body_reserved_; // the body being read, against context_.bodies

  bool reading_ = false;
  bool peer_done_ = false; // the client half-closed: it sends nothing more
  bool writing_ = false;
  bool draining_ = false;
  bool closed_ = false;
  deadline armed_ = deadline::none;
  std::uint64_t armed_seq_ = 0; // request_seq_ when armed_ was armed
};

template <class Work>
void http_session::hand_off(const std::shared_ptr<post_gate>& gate,
                            const std::weak_ptr<http_session>& weak, Work work) {
  gate->run_if_open([&] {
    auto self = weak.lock();
    if (!self)
      return;
    // The strand copy first: `self` moves into the handler, which the io_context
    // owns and destroys, so the connection never dies on this thread.
    auto on = self->strand_;
    boost::asio::post(
        on, [self = std::move(self), work = std::move(work)]() mutable { work(*self); });
  });
}

} // namespace canopy::server
