#include <canopy/server/transport/http_server.hpp>

#include "transport/http_session.hpp"
#include "transport/transport_context.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <csignal>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace canopy::server {

namespace asio = boost::asio;
using asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// After a failed accept (mostly: out of file descriptors) wait before the next, so the
// loop does not spin while the condition lasts.
constexpr std::chrono::milliseconds accept_retry_delay{50};

} // namespace

struct http_server::impl {
  impl(server_options options, request_handler& handler,
       std::shared_ptr<server_metrics> metrics);
  ~impl();
  void run();
  void accept();
  void on_accept(error_code ec, http_session::socket peer);
  void wait_for_signal();
  void begin_drain();
  void watch_drain();
  void close_every_connection();

  // Declared before `io` so it outlives it: connections destroyed with `io` use it.
  transport_context context;
  asio::io_context io;
  // Serializes the acceptor, the retry timer, the signal set and `stopping`.
  const http_session::strand control;
  tcp::acceptor acceptor;
  asio::steady_timer retry;
  asio::steady_timer drain_watch; // while draining: done yet, or past drain_timeout?
  std::chrono::steady_clock::time_point drain_deadline;
  std::optional<asio::signal_set> signals; // from construction until run() returns
  std::uint16_t port = 0;
  bool stopping = false;
};

http_server::impl::impl(server_options options, request_handler& handler,
                        std::shared_ptr<server_metrics> metrics)
    : context{std::move(options), handler,
              metrics ? std::move(metrics) : std::make_shared<server_metrics>()},
      io(static_cast<int>(std::max<std::uint32_t>(1, context.options.io_threads))),
      control(asio::make_strand(io)), acceptor(control), retry(control),
      drain_watch(control) {
  context.metrics->watch_budget("bodies", "bytes", context.bodies);
  const auto& host = context.options.host;
  auto service = std::to_string(context.options.port);
  error_code ec;
  auto endpoints = tcp::resolver(io).resolve(host, service, tcp::resolver::passive, ec);
  for (const auto& entry : endpoints) {
    error_code ignored;
    acceptor.close(ignored);
    acceptor.open(entry.endpoint().protocol(), ec);
    if (!ec)
      acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec)
      acceptor.bind(entry.endpoint(), ec);
    if (!ec)
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec)
      break;
  }
  if (ec || !acceptor.is_open())
    throw std::runtime_error("cannot listen on " + host + ":" + service + ": " +
                             (ec ? ec.message() : "no address"));
  port = acceptor.local_endpoint().port();
  // From construction, so a signal that comes before run() (just after the owner says
  // it listens) waits for it instead of killing the process.
  signals.emplace(control, SIGINT, SIGTERM);
}

http_server::impl::~impl() {
  // From here on a late respond does nothing; then `io` and the connections go.
  context.gate->close();
}

void http_server::impl::run() {
  wait_for_signal();
  asio::post(control, [this] { accept(); });
  std::vector<std::thread> helpers;
  for (std::uint32_t i = 1; i < context.options.io_threads; ++i)
    helpers.emplace_back([this] { io.run(); });
  // Returns once nothing is left to do: acceptor closed and every connection gone.
  io.run();
  for (auto& helper : helpers)
    helper.join();
  signals.reset();
}

void http_server::impl::accept() {
  acceptor.async_accept(asio::make_strand(io),
                        [this](error_code ec, http_session::socket peer) {
                          on_accept(ec, std::move(peer));
                        });
}

void http_server::impl::on_accept(error_code ec, http_session::socket peer) {
  if (stopping) // drops a connection accepted just before the acceptor closed
    return;
  if (ec) {
    retry.expires_after(accept_retry_delay);
    retry.async_wait([this](error_code waited) {
      if (!waited && !stopping)
        accept();
    });
    return;
  }
  if (context.connections.size() >= context.options.max_connections) {
    context.metrics->connection_refused();
    error_code ignored;
    peer.close(ignored);
  } else {
    std::make_shared<http_session>(std::move(peer), context)->start();
  }
  accept();
}

// The first signal drains; a second one, while draining, closes every connection.
void http_server::impl::wait_for_signal() {
  signals->async_wait([this](const error_code& ec, int) {
    if (ec)
      return;
    if (stopping)
      return close_every_connection();
    wait_for_signal(); // first: the drain cancels it once the last connection is gone
    begin_drain();
  });
}

void http_server::impl::begin_drain() {
  if (stopping)
    return;
  stopping = true;
  error_code ignored;
  acceptor.close(ignored);
  retry.cancel();
  for (const auto& session : context.connections.live())
    session->drain();
  drain_deadline = std::chrono::steady_clock::now() + context.options.drain_timeout;
  watch_drain();
}

// Every few milliseconds until the last connection is gone, when the signal wait ends
// too and run() can return; past drain_timeout, the connections still open (an answer
// still computing, or a client reading slowly) are closed.
void http_server::impl::watch_drain() {
  if (context.connections.size() == 0) {
    error_code ignored;
    if (signals)
      signals->cancel(ignored);
    return;
  }
  if (std::chrono::steady_clock::now() >= drain_deadline)
    for (const auto& session : context.connections.live())
      session->cut(); // streams end with their cut piece; the rest close
  drain_watch.expires_after(std::chrono::milliseconds(20));
  drain_watch.async_wait([this](error_code ec) {
    if (!ec)
      watch_drain();
  });
}

void http_server::impl::close_every_connection() {
  for (const auto& session : context.connections.live())
    session->abort();
}

http_server::http_server(server_options options, request_handler& handler,
                         std::shared_ptr<server_metrics> metrics)
    : impl_(std::make_unique<impl>(std::move(options), handler, std::move(metrics))) {}

http_server::~http_server() = default;

std::uint16_t http_server::port() const {
  return impl_->port;
}

void http_server::run() {
  impl_->run();
}

void http_server::stop() {
  asio::post(impl_->control, [impl = impl_.get()] { impl->begin_drain(); });
}

} // namespace canopy::server
