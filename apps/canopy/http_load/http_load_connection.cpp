#include "http_load/http_load_connection.hpp"

#include "http_load/http_load_check.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include <stdexcept>

namespace canopy::app {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::size_t read_capacity = 64 << 10;

} // namespace

load_connection::load_connection(asio::ip::tcp::socket socket)
    : socket_(std::move(socket)) {
  // Requests leave in one write each; no reason to hold one back.
  socket_.set_option(asio::ip::tcp::no_delay(true));
  // Beast reads at most the buffer's free capacity (512 bytes when empty): room for
  // a whole answer saves several reads per answer.
  buffer_.reserve(read_capacity);
}

void load_connection::start(load_phase& phase, request_source& source) {
  phase_ = &phase;
  source_ = &source;
  send_next();
}

void load_connection::abandon() {
  abandoned_ = true;
  close();
}

void load_connection::close() {
  error_code ignored;
  socket_.close(ignored);
}

void load_connection::send_next() {
  sent_at_ = load_clock::now();
  if (sent_at_ >= phase_->stop_at || !(tokens_ = source_->next()))
    return stop();
  phase_->writer.write(request_, *tokens_);
  asio::async_write(socket_, asio::buffer(request_), [this](error_code ec, std::size_t) {
    if (ec)
      return fail("sending a request", ec);
    read_answer();
  });
}

void load_connection::read_answer() {
  reader_.emplace(body_);
  boost::beast::http::async_read(
      socket_, buffer_, *reader_,
      [this](error_code ec, std::size_t bytes) { on_answer(ec, bytes); });
}

void load_connection::on_answer(error_code ec, std::size_t bytes) {
  const auto now = load_clock::now();
  if (ec)
    return fail("reading an answer", ec);
  auto& tally = phase_->tally;
  const auto engine_ms = reader_->engine_ms();
  auto problem = check_answer(reader_->read(), phase_->payload, *tokens_, phase_->vocab);
  if (problem.empty() && !engine_ms && phase_->engine_timed)
    problem = "no Server-Timing: engine;dur= header";
  if (!problem.empty()) {
    tally.errors.add(std::move(problem));
  } else {
    const double latency =
        std::chrono::duration<double, std::micro>(now - sent_at_).count();
    tally.latency_us.push_back(latency);
    const double engine_us = engine_ms.value_or(0) * 1000;
    tally.engine_us.push_back(engine_us);
    tally.overhead_us.push_back(latency - engine_us);
    tally.response_bytes += bytes;
    tally.body_bytes += body_.size();
    tally.last_answer = now;
  }
  if (!reader_->keep_alive()) {
    tally.errors.add("the server ended a keep-alive connection after an answer");
    close();
    return stop();
  }
  send_next();
}

void load_connection::fail(const char* doing, error_code ec) {
  const bool closed_by_server = ec == boost::beast::http::error::end_of_stream ||
                                ec == asio::error::eof ||
                                ec == asio::error::connection_reset;
  phase_->tally.errors.add(abandoned_ ? "no answer before the run's time limit"
                           : closed_by_server
                               ? std::string(doing) + ": the server closed the connection"
                               : std::string(doing) + ": " + ec.message());
  close();
  stop();
}

void load_connection::stop() {
  if (--phase_->running == 0)
    phase_->limit.cancel();
}

std::vector<asio::ip::tcp::socket> connect_all(asio::io_context& io,
                                               const http_target& target,
                                               std::size_t count,
                                               std::chrono::seconds timeout) {
  const auto where = "cannot connect to " + target.url + ": ";
  error_code ec;
  const auto endpoints =
      asio::ip::tcp::resolver(io).resolve(target.host, target.port, ec);
  if (ec)
    throw std::runtime_error(where + ec.message());
  std::vector<asio::ip::tcp::socket> sockets;
  for (std::size_t i = 0; i < count; ++i)
    sockets.emplace_back(io);
  asio::steady_timer limit(io, timeout);
  error_code first_failure;
  std::size_t pending = count;
  for (auto& s : sockets)
    asio::async_connect(s, endpoints, [&](error_code failure, const auto&) {
      if (failure && !first_failure)
        first_failure = failure;
      if (--pending == 0)
        limit.cancel();
    });
  bool timed_out = false;
  limit.async_wait([&](error_code cancelled) {
    if (cancelled)
      return;
    timed_out = true;
    error_code ignored;
    for (auto& s : sockets)
      s.close(ignored);
  });
  io.restart();
  io.run();
  if (timed_out)
    throw std::runtime_error(where + "no connection within " +
                             std::to_string(timeout.count()) + " s");
  if (first_failure)
    throw std::runtime_error(where + first_failure.message());
  return sockets;
}

} // namespace canopy::app
