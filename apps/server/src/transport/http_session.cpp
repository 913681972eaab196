#include "transport/http_session.hpp"

#include "transport/bearer_auth.hpp"
#include "transport/http_wire.hpp"

#include <canopy/server/api_error.hpp>

#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <string>
#include <string_view>

// Note [connection states]
// A connection runs one event loop, advance(), after every event (bytes read, response
// written, respond arrived, deadline, drain). It reads the socket whenever its buffer
// has room, even with a request in flight: that is how a client that leaves is noticed
// (a reset: cancel the request, close), and how the next request of a pipelining
// client is read. An end of stream is a half-close, not a departure (TCP cannot tell
// one from a client that closed before its answer): the complete requests read are
// answered in order, then the connection closes; an answer nobody reads fails its
// write and closes it. The request being read goes waiting -> header (first byte) -> body
// (header complete) -> complete; a complete request is dispatched once no other is in
// flight and nothing is being written, so answers leave in request order. A request
// that breaks a limit makes the connection `failed`: its error answer goes out after
// the answer in flight, then the connection lingers (send side shut, reading and
// discarding until the client closes or the linger deadline) so the client reads the
// error instead of a reset. A full read buffer stops reading (back-pressure: the rest
// waits in the socket) until requests leave it; the request in flight keeps the
// connection alive meanwhile (keep_for_answer_). One timer serves the phase: idle
// (nothing in flight, nothing read), header and body (from the phase's start), linger.
// Another closes the connection when a write makes no progress for write_stall_timeout
// (a client that stopped reading would otherwise hold its connection, its answer's
// bytes in the answer budget, and a drain, forever). Bodies being read and answers
// until written hold their bytes against budgets every connection shares (byte_budget):
// past them a request gets 503, so a flood of clients cannot grow the process.
// A streamed answer (server-sent events) keeps its request in flight until the handler
// has ended it and its last bytes are written: its head and pieces go out as they
// come, each write under the write-stall timer, with no deadline while the handler
// computes the next piece (the engine's own timeouts bound that). A client that leaves
// meanwhile cancels the request, and a pipelined request waits its turn as usual.

namespace canopy::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// The longest wait for a client to close after its last answer.
constexpr std::chrono::milliseconds linger_limit{1000};
// How often a half-closed client whose request is in flight is probed (Note [departed
// clients]).
constexpr std::chrono::milliseconds departure_probe_interval{1000};
// How long a stream cut at the drain deadline has to write its last piece.
constexpr std::chrono::milliseconds cut_grace{1000};

} // namespace

http_session::http_session(socket peer, transport_context& context)
    : context_(context), strand_(peer.get_executor()), socket_(std::move(peer)),
      read_deadline_(strand_), write_deadline_(strand_), probe_(strand_),
      cut_deadline_(strand_), buffer_(header_limit(context.options) + read_chunk_bytes),
      body_reserved_(context.bodies->reservation()) {
  start_request();
}

http_session::~http_session() {
  context_.connections.remove(this);
  context_.metrics->connection_closed();
}

void http_session::start() {
  context_.connections.add(shared_from_this());
  context_.metrics->connection_accepted();
  asio::post(strand_, [self = shared_from_this()] { self->advance(); });
}

void http_session::drain() {
  asio::post(strand_, [self = shared_from_this()] {
    self->draining_ = true;
    self->advance();
  });
}

void http_session::abort() {
  asio::post(strand_, [self = shared_from_this()] { self->close_now(); });
}

void http_session::cut() {
  asio::post(strand_, [self = shared_from_this()] {
    auto& stream = self->stream_;
    if (self->closed_ || (stream && stream->cutting))
      return; // closed, or being cut already (the drain asks again every few ms)
    if (!stream || !stream->chunked || stream->ended)
      return self->close_now();
    stream->cutting = true;
    self->cut_deadline_.arm(cut_grace, [self] { self->close_now(); });
    self->write_stream();
  });
}

void http_session::advance() {
  if (closed_)
    return;
  // Draining: what is idle, being read or merely waiting its turn is dropped; only an
  // answer owed to the handler's caller (in flight or being written) is still written.
  if (draining_ && !in_flight_ && !writing_)
    return close_now();
  if (!draining_)
    progress();
  // Half-closed, and everything it sent that can be answered is: nothing is left.
  if (peer_done_ && !in_flight_ && !writing_ && phase_ != phase::complete)
    return close_now();
  update_deadline();
  read();
}

void http_session::progress() {
  while (phase_ != phase::lingering) {
    parse();
    if (in_flight_ || writing_)
      return;
    if (pending_error_) {
      auto [done, response] = std::move(*pending_error_);
      pending_error_.reset();
      return write(std::move(done), std::move(response));
    }
    if (phase_ != phase::complete)
      return;
    dispatch();
  }
}

void http_session::parse() {
  if (phase_ == phase::waiting && buffer_.size() > parsed_)
    phase_ = phase::header; // the header deadline runs from the first byte
  while ((phase_ == phase::header || phase_ == phase::body) && buffer_.size() > parsed_) {
    beast::error_code ec;
    parsed_ += parser_->put(asio::buffer(buffer_.data()) + parsed_, ec);
    if (ec == http::error::need_more)
      return;
    if (ec)
      return fail(parse_error(ec, context_.options));
    if (phase_ == phase::header && parser_->is_header_done())
      on_header();
    if (phase_ == phase::body && !reserve_body())
      return;
    if (phase_ != phase::failed && parser_->is_done()) {
      phase_ = phase::complete;
      read_done_ = clock::now();
    }
  }
}

void http_session::on_header() {
  const auto& request = parser_->get();
  const auto& tokens = context_.options.auth_tokens;
  bool open = tokens.empty();
  if (!open) {
    // Open to anyone: GET /healthz, and the page's files, which hold no data (what the
    // page shows comes through the API, with the token the page asks for).
    const auto route = server_metrics::route_label(to_std(request.target()));
    const bool get = request.method() == http::verb::get;
    open =
        (get && route == "/healthz") || (route == "/web" && context_.options.web_page &&
                                         (get || request.method() == http::verb::head));
  }
  const auto tenant =
      open ? std::nullopt
           : bearer_tenant(to_std(request[http::field::authorization]), tokens);
  tenant_ = tenant && tokens.size() > 1 ? std::to_string(*tenant + 1) : std::string();
  if (!open && !tenant) {
    // Refused before its body is read, so the connection cannot be reused.
    auto refusal = error_response(401, "unauthorized",
                                  "this server needs \"Authorization: Bearer <token>\" "
                                  "with the right token");
    refusal.headers.emplace_back("WWW-Authenticate", "Bearer");
    return fail(std::move(refusal));
  }
  if (auto problem = transfer_coding_problem(request[http::field::transfer_encoding]))
    return fail(std::move(*problem));
  phase_ = phase::body;
  // A client waiting for "100 Continue" gets it only when this request is the next to
  // be answered; otherwise it sends its body after its own timeout.
  if (request.version() == 11 && !in_flight_ && !writing_ && !parser_->is_done() &&
      beast::iequals(request[http::field::expect], "100-continue"))
    write_continue();
}

bool http_session::reserve_body() {
  const auto length = parser_->content_length();
  const auto needed =
      length ? static_cast<std::size_t>(*length) : parser_->get().body().size();
  if (body_reserved_.resize(needed))
    return true;
  fail(budget_full(*context_.bodies, needed, "request bodies being read",
                   "--body-budget-bytes"));
  return false;
}

void http_session::fail(http_response response) {
  exchange done;
  done.target = std::string(parser_->get().target()); // empty before the start line
  done.version = parser_->get().version();
  done.read_done = clock::now();
  phase_ = phase::failed;
  pending_error_.emplace(std::move(done), std::move(response));
}

void http_session::dispatch() {
  auto message = parser_->release();
  exchange done{context_.next_id.fetch_add(1, std::memory_order_relaxed),
                std::string(message.target()),
                message.version(),
                message.keep_alive(),
                read_done_,
                message.body().size()};
  http_request request{std::string(message.method_string()),
                       done.target,
                       std::string(message[http::field::content_type]),
                       std::string(message[http::field::accept]),
                       std::move(message.body()),
                       std::move(tenant_)};
  auto id = done.id;
  in_flight_ = std::move(done);
  keep_for_answer_ = shared_from_this();
  work_.emplace(strand_.get_inner_executor());
  start_request();
  if (request.body.empty()) { // cheap: answered here (GET /healthz stays prompt)
    context_.handler.handle(id, std::move(request), responder(id));
    return;
  }
  // Parsing and tokenizing a body take time in proportion to it: on a handler thread.
  // The body's reservation goes with it until the handler has let it go.
  auto body = std::make_shared<byte_reservation>(std::move(body_reserved_));
  body_reserved_ = context_.bodies->reservation();
  boost::asio::post(context_.handlers,
                    [&handler = context_.handler, id, body, request = std::move(request),
                     respond = responder(id)]() mutable {
                      handler.handle(id, std::move(request), std::move(respond));
                    });
}

void http_session::start_request() {
  parser_.emplace();
  parser_->header_limit(header_limit(context_.options));
  parser_->body_limit(context_.options.max_body_bytes);
  phase_ = phase::waiting;
  ++request_seq_;
}

respond_fn http_session::responder(request_id id) {
  return [gate = context_.gate, weak = weak_from_this(), id](http_response response) {
    hand_off(gate, weak,
             [id, response = std::move(response)](http_session& self) mutable {
               self.on_response(id, std::move(response));
             });
  };
}

void http_session::on_response(request_id id, http_response response) {
  // Cancelled (the client left), or a second respond for the same request.
  if (closed_ || !in_flight_ || in_flight_->id != id || stream_)
    return;
  if (response.stream) {
    begin_stream(std::move(response));
    return advance();
  }
  auto done = std::move(*in_flight_);
  in_flight_.reset();
  work_.reset();
  probe_.disarm();
  auto keep = std::move(keep_for_answer_); // the write holds it from here
  if (writing_) // a departure probe is on its way: the answer follows it
    after_probe_.emplace(std::move(done), std::move(response));
  else
    write(std::move(done), std::move(response));
  advance();
}

void http_session::write(exchange done, http_response response) {
  done.keep_alive = done.keep_alive && !draining_;
  response_reserved_ = std::move(response.reserved);
  response_ = to_wire(std::move(response), done.version, done.keep_alive);
  written_ = std::move(done);
  start_write();
}

void http_session::write_continue() {
  response_ = {};
  response_.version(11);
  response_.result(http::status::continue_);
  written_.reset();
  start_write();
}

// Note [departed clients]
// A client that leaves while its request is computed usually closes normally: its FIN
// reads as an end of stream, which is also what a client that only half-closed (it
// still reads) sends. Only a write tells them apart: to a socket its peer closed, the
// first write draws a reset and the next fails. So while a half-closed HTTP/1.1
// client's request is in flight, "100 Continue" goes out every second (a client must
// read past 1xx answers it did not expect, RFC 9110 15.2); when one fails, the
// connection closes and the request is cancelled, as for a reset. Streams write their
// own pieces; HTTP/1.0 allows no 1xx, and its requests run to the end (bounded by
// --max-generated-tokens and the generation budget).
void http_session::probe_departure() {
  if (closed_ || !in_flight_ || in_flight_->version != 11)
    return;
  probe_.arm(departure_probe_interval, [self = shared_from_this()] {
    if (self->closed_ || !self->in_flight_)
      return;
    if (!self->writing_ && !self->stream_)
      self->write_continue();
    self->probe_departure();
  });
}

void http_session::start_write() {
  writing_ = true;
  serializer_.emplace(response_);
  write_some();
}

void http_session::write_some() {
  auto self = shared_from_this();
  write_deadline_.arm(context_.options.write_stall_timeout,
                      [self] { self->close_now(); });
  http::async_write_some(socket_, *serializer_, [self](error_code ec, std::size_t) {
    self->on_written_some(ec);
  });
}

void http_session::on_written_some(error_code ec) {
  if (!closed_ && !ec && !serializer_->is_done())
    return write_some();
  writing_ = false;
  write_deadline_.disarm();
  const auto status = response_.result_int();
  const auto body_bytes = response_.body().size();
  // The body may be large: it and its reservation go back as soon as it is sent (or
  // can no longer be), not when the next response replaces it.
  serializer_.reset();
  response_ = {};
  response_reserved_.reset();
  if (closed_)
    return;
  if (ec)
    return close_now();
  if (!written_) { // "100 Continue": the request's own answer may have come meanwhile
    if (after_probe_) {
      auto [done, response] = std::move(*after_probe_);
      after_probe_.reset();
      write(std::move(done), std::move(response));
    } else if (stream_) {
      write_stream();
    }
    return advance();
  }
  answered(std::move(*written_), status, body_bytes);
}

void http_session::answered(exchange done, int status, std::size_t body_bytes) {
  context_.metrics->request_done(done.target, status, clock::now() - done.read_done,
                                 done.body_in, body_bytes);
  if (!done.keep_alive)
    return finish();
  advance();
}

void http_session::finish() {
  phase_ = phase::lingering;
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  advance();
}

void http_session::read() {
  if (reading_ || closed_ || peer_done_)
    return;
  buffer_.consume(phase_ == phase::lingering ? buffer_.size() : parsed_);
  parsed_ = 0;
  auto room = buffer_.max_size() - buffer_.size();
  if (room == 0) {
    // In a body, what fills the buffer unparsed is one chunk-size line, extension or
    // trailer that the parser cannot finish: no reading will, so it fails now (it
    // waited for the body timeout, then got a misleading 408).
    if (phase_ == phase::body) {
      fail(
          error_response(400, "malformed_http",
                         "a chunk-size line, chunk extension or trailer is longer than " +
                             std::to_string(buffer_.max_size()) + " bytes"));
      return advance();
    }
    return; // full of a complete request, which waits its turn
  }
  reading_ = true;
  socket_.async_read_some(buffer_.prepare(std::min(room, read_chunk_bytes)),
                          [self = shared_from_this()](error_code ec, std::size_t bytes) {
                            self->on_read(ec, bytes);
                          });
}

void http_session::on_read(error_code ec, std::size_t bytes) {
  reading_ = false;
  if (closed_)
    return;
  // An end of stream is a half-close: the client may still read, so what it asked is
  // answered. A reset (or any other failure) means it left: that is abandoned.
  if (ec == asio::error::eof) {
    peer_done_ = true;
    probe_departure();
    return advance();
  }
  if (ec)
    return close_now();
  buffer_.commit(bytes);
  advance();
}

http_session::deadline http_session::wanted_deadline() const {
  switch (phase_) {
  case phase::waiting:
    return in_flight_ || writing_ ? deadline::none : deadline::idle;
  case phase::header:
    return deadline::header;
  case phase::body:
    return deadline::body;
  case phase::lingering:
    return deadline::linger;
  case phase::complete:
  case phase::failed:
    break;
  }
  return deadline::none;
}

void http_session::update_deadline() {
  auto wanted = wanted_deadline();
  if (wanted == armed_ && request_seq_ == armed_seq_)
    return;
  armed_ = wanted;
  armed_seq_ = request_seq_;
  const auto& options = context_.options;
  clock::duration after{};
  switch (wanted) {
  case deadline::none:
    return read_deadline_.disarm();
  case deadline::idle:
    after = options.idle_timeout;
    break;
  case deadline::header:
    after = options.header_timeout;
    break;
  case deadline::body:
    after = options.body_timeout;
    break;
  case deadline::linger:
    after = std::min<clock::duration>(options.idle_timeout, linger_limit);
    break;
  }
  read_deadline_.arm(after, [self = shared_from_this()] { self->on_deadline(); });
}

void http_session::on_deadline() {
  if (closed_)
    return;
  const auto& options = context_.options;
  switch (armed_) {
  case deadline::header:
    fail(error_response(408, "request_timeout",
                        "the header section did not arrive within " +
                            std::to_string(options.header_timeout.count()) + " ms"));
    return advance();
  case deadline::body:
    fail(error_response(408, "request_timeout",
                        "the body did not arrive within " +
                            std::to_string(options.body_timeout.count()) + " ms"));
    return advance();
  case deadline::none:
  case deadline::idle:
  case deadline::linger:
    break;
  }
  close_now();
}

void http_session::close_now() {
  if (closed_)
    return;
  closed_ = true;
  if (in_flight_) {
    context_.metrics->request_cancelled();
    context_.handler.cancel(in_flight_->id);
    in_flight_.reset();
  }
  work_.reset();
  // Last: this may be the only reference, and the rest of close_now still runs.
  auto keep = std::move(keep_for_answer_);
  read_deadline_.disarm();
  write_deadline_.disarm();
  probe_.disarm();
  cut_deadline_.disarm();
  after_probe_.reset();
  error_code ignored;
  socket_.close(ignored);
}

} // namespace canopy::server
