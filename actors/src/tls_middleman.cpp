#include <canopy/actors/tls_middleman.hpp>

#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>
#include <caf/openssl/session.hpp>

#include <openssl/err.h>

namespace canopy::actors {

namespace {

namespace net = caf::io::network;

/// CAF's OpenSSL session as the I/O policy of CAF's streams, each call starting with an
/// empty error queue (Note [TLS error queue]).
class session_policy {
public:
  explicit session_policy(caf::openssl::session_ptr session)
      : session_(std::move(session)) {}

  net::rw_state read_some(std::size_t& result, net::native_socket fd, void* buf,
                          std::size_t len) {
    ERR_clear_error();
    return session_->read_some(result, fd, buf, len);
  }

  net::rw_state write_some(std::size_t& result, net::native_socket fd, const void* buf,
                           std::size_t len) {
    ERR_clear_error();
    return session_->write_some(result, fd, buf, len);
  }

  bool must_read_more(net::native_socket fd, std::size_t threshold) {
    return session_->must_read_more(fd, threshold);
  }

private:
  caf::openssl::session_ptr session_;
};

/// A session made on `fd` (accepted, or connected), nullptr when OpenSSL refused at once.
caf::openssl::session_ptr start_session(caf::actor_system& system, net::native_socket fd,
                                        bool accepted) {
  ERR_clear_error();
  return caf::openssl::make_session(system, fd, accepted);
}

/// One TLS connection, as the BASP broker sees a connection.
class tls_scribe final : public caf::io::scribe {
public:
  tls_scribe(net::default_multiplexer& mpx, net::native_socket fd,
             caf::openssl::session_ptr session)
    : scribe(net::conn_hdl_from_socket(fd)), stream_(mpx, fd, std::move(session)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
      // The handshake advances on writes as well as reads: an empty write starts it
      // on the side that must speak first.
      stream_.force_empty_write(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto a = net::remote_addr_of_fd(stream_.fd());
    return a ? *a : std::string{};
  }
  std::uint16_t port() const override {
    auto p = net::remote_port_of_fd(stream_.fd());
    return p ? *p : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  net::stream_impl<session_policy> stream_;
};

/// Accepts TCP as CAF does, then puts each connection behind a TLS session.
class tls_doorman final : public net::doorman_impl {
public:
  using net::doorman_impl::doorman_impl;

  bool new_connection() override {
    if (detached()) // the broker let go while the multiplexer still had events for it
      return false;
    auto& mpx = acceptor_.backend();
    const auto fd = acceptor_.accepted_socket();
    net::nonblocking(fd, true);
    auto session = start_session(parent()->system(), fd, true);
    if (!session) {
      net::close_socket(fd);
      return false;
    }
    auto scribe = caf::make_counted<tls_scribe>(mpx, fd, std::move(session));
    const auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
};

class tls_middleman_actor final : public caf::io::middleman_actor_impl {
public:
  using caf::io::middleman_actor_impl::middleman_actor_impl;

  const char* name() const override { return "canopy.tls_middleman"; }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             std::uint16_t port) override {
    auto fd = net::new_tcp_connection(host, port);
    if (!fd)
      return std::move(fd.error());
    net::nonblocking(*fd, true);
    auto session = start_session(system(), *fd, false);
    if (!session) {
      net::close_socket(*fd);
      return caf::sec::cannot_connect_to_node;
    }
    return caf::make_counted<tls_scribe>(multiplexer(), *fd, std::move(session));
  }

  caf::expected<caf::io::doorman_ptr> open(std::uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<tls_doorman>(multiplexer(), *fd);
  }

private:
  net::default_multiplexer& multiplexer() {
    return static_cast<net::default_multiplexer&>(system().middleman().backend());
  }
};

} // namespace

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& system) {
  auto broker = system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached: it blocks in connect; hidden: not counted by await_all_actors_done.
  return system.spawn<tls_middleman_actor, caf::detached + caf::hidden>(std::move(broker));
}

} // namespace canopy::actors
