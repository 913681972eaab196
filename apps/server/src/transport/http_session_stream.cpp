// The streamed answers of an http_session (server-sent events): the head and pieces
// go out as the handler produces them (Note [connection states] in http_session.cpp).
#include "transport/http_session.hpp"
#include "transport/http_wire.hpp"

#include <boost/beast/http/write.hpp>

#include <sstream>

namespace canopy::server {

namespace asio = boost::asio;

void http_session::begin_stream(http_response head) {
  auto& done = *in_flight_;
  stream_state stream;
  stream.chunked = done.version == 11;
  // HTTP/1.0 has no chunks: its body ends where the connection does.
  done.keep_alive = done.keep_alive && stream.chunked && !draining_;
  stream.status = head.status;
  stream.source = std::move(head.stream);
  stream.cut_piece = std::move(head.stream_cut);
  response_reserved_ = std::move(head.reserved);
  auto wire = wire_head(head, done.version, done.keep_alive);
  wire.chunked(stream.chunked);
  std::ostringstream text;
  text << wire.base();
  stream.outgoing = text.str();
  frame(stream.outgoing, head.body, stream.chunked);
  stream.body_bytes = head.body.size();
  stream_ = std::move(stream);
  stream_->source->on_ready([gate = context_.gate, weak = weak_from_this()] {
    hand_off(gate, weak, [](http_session& self) { self.write_stream(); });
  });
  write_stream();
}

void http_session::write_stream() {
  if (closed_ || writing_ || !stream_)
    return;
  auto& stream = *stream_;
  // What the handler has pushed is taken only between writes: `outgoing` is the
  // buffer being written.
  if (stream.outgoing.empty() && !stream.ended && stream.cutting) {
    frame(stream.outgoing, stream.cut_piece, true);
    stream.body_bytes += stream.cut_piece.size();
    stream.outgoing += "0\r\n\r\n";
    stream.ended = true;
  }
  if (stream.outgoing.empty() && !stream.ended) {
    auto [bytes, ended] = stream.source->take();
    frame(stream.outgoing, bytes, stream.chunked);
    stream.body_bytes += bytes.size();
    if (ended && stream.chunked)
      stream.outgoing += "0\r\n\r\n";
    stream.ended = ended;
  }
  if (stream.outgoing.empty()) {
    if (stream.ended)
      end_stream();
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  write_deadline_.arm(context_.options.write_stall_timeout,
                      [self] { self->close_now(); });
  socket_.async_write_some(
      asio::buffer(stream.outgoing),
      [self](error_code ec, std::size_t bytes) { self->on_stream_written(ec, bytes); });
}

void http_session::on_stream_written(error_code ec, std::size_t bytes) {
  writing_ = false;
  write_deadline_.disarm();
  if (closed_)
    return;
  if (ec)
    return close_now();
  stream_->outgoing.erase(0, bytes);
  write_stream();
}

void http_session::end_stream() {
  auto done = std::move(*in_flight_);
  in_flight_.reset();
  work_.reset();
  auto keep = std::move(keep_for_answer_);
  const auto status = stream_->status;
  const auto body_bytes = stream_->body_bytes;
  stream_.reset();
  response_reserved_.reset();
  answered(std::move(done), status, body_bytes);
}

} // namespace canopy::server
