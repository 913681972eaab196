// Fronts' and nodes' middleman, every connection behind the gate (see
// cluster_middleman.hpp).
#include <canopy/actors/cluster_middleman.hpp>

#include "gated_scribe.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/openssl/session.hpp>
#include <caf/policy/tcp.hpp>

#include <openssl/err.h>

namespace canopy::actors {

namespace {

namespace net = caf::io::network;
using detail::gated_scribe;
using detail::pending_gates;
using gate_tick_atom = caf::atom_constant<caf::atom("gate_tick")>;

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

/// Makes the gated connection for a connected or accepted socket.
class connection_factory {
public:
  connection_factory(caf::actor_system& system, gate_settings settings)
      : system_(system), settings_(std::move(settings)),
        pending_(std::make_shared<pending_gates>(settings_.handshake_timeout,
                                                 settings_.max_pending)) {}

  /// The connection on `fd` to or from `peer` (peer_label); nullptr when OpenSSL
  /// refused the socket at once.
  caf::io::scribe_ptr make(net::default_multiplexer& mpx, net::native_socket fd,
                           bool accepted, const std::string& peer) const {
    connection_gate gate(accepted ? auth_role::node : auth_role::front, settings_.secret);
    std::function<void(const std::string&)> refused;
    if (settings_.on_refused)
      refused = [report = settings_.on_refused, peer](const std::string& why) {
        report(peer, why);
      };
    if (!settings_.tls)
      return caf::make_counted<gated_scribe<caf::policy::tcp>>(
          mpx, fd, std::move(gate), pending_, std::move(refused));
    ERR_clear_error();
    auto session = caf::openssl::make_session(system_, fd, accepted);
    if (!session)
      return nullptr;
    return caf::make_counted<gated_scribe<session_policy>>(
        mpx, fd, std::move(gate), pending_, std::move(refused), std::move(session));
  }

  const std::shared_ptr<pending_gates>& pending() const { return pending_; }
  const gate_settings& settings() const { return settings_; }

private:
  caf::actor_system& system_;
  gate_settings settings_;
  std::shared_ptr<pending_gates> pending_;
};

using factory_ptr = std::shared_ptr<const connection_factory>;

/// Accepts TCP as CAF does, then puts each connection behind the gate.
class gated_doorman final : public net::doorman_impl {
public:
  gated_doorman(net::default_multiplexer& mpx, net::native_socket fd, factory_ptr factory)
      : doorman_impl(mpx, fd), factory_(std::move(factory)) {}

  bool new_connection() override {
    if (detached()) // the broker let go while the multiplexer still had events for it
      return false;
    auto& mpx = acceptor_.backend();
    const auto fd = acceptor_.accepted_socket();
    net::nonblocking(fd, true);
    const auto host = net::remote_addr_of_fd(fd);
    const auto port = net::remote_port_of_fd(fd);
    auto scribe =
        factory_->make(mpx, fd, true, peer_label(host ? *host : "?", port ? *port : 0));
    if (!scribe) {
      net::close_socket(fd);
      return false;
    }
    const auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

private:
  factory_ptr factory_;
};

class cluster_middleman_actor final : public caf::io::middleman_actor_impl {
public:
  cluster_middleman_actor(caf::actor_config& config, caf::actor broker,
                          factory_ptr factory)
      : middleman_actor_impl(config, std::move(broker)), factory_(std::move(factory)) {}

  const char* name() const override { return "canopy.cluster_middleman"; }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             std::uint16_t port) override {
    auto fd = net::new_tcp_connection(host, port);
    if (!fd)
      return std::move(fd.error());
    net::nonblocking(*fd, true);
    auto scribe = factory_->make(multiplexer(), *fd, false, peer_label(host, port));
    if (!scribe) {
      net::close_socket(*fd);
      return caf::sec::cannot_connect_to_node;
    }
    return scribe;
  }

  caf::expected<caf::io::doorman_ptr> open(std::uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<gated_doorman>(multiplexer(), *fd, factory_);
  }

private:
  net::default_multiplexer& multiplexer() {
    return static_cast<net::default_multiplexer&>(system().middleman().backend());
  }

  factory_ptr factory_;
};

/// Sweeps the waiting list on the multiplexer's thread a few times per handshake
/// timeout, until the middleman ends; then closes what still waits.
caf::behavior gate_clock(caf::event_based_actor* self, caf::io::middleman_actor middleman,
                         factory_ptr factory) {
  self->monitor(middleman);
  self->set_down_handler([=](caf::down_msg&) {
    auto& mpx =
        static_cast<net::default_multiplexer&>(self->system().middleman().backend());
    mpx.dispatch([&mpx, pending = factory->pending()] { pending->expire_all(&mpx); });
    self->quit();
  });
  const auto period =
      std::max(std::chrono::milliseconds(10), factory->settings().handshake_timeout / 4);
  self->send(self, gate_tick_atom::value);
  return {[=](gate_tick_atom) {
    auto& mpx =
        static_cast<net::default_multiplexer&>(self->system().middleman().backend());
    mpx.dispatch([&mpx, pending = factory->pending()] { pending->sweep(&mpx); });
    self->delayed_send(self, period, gate_tick_atom::value);
  }};
}

} // namespace

std::string peer_label(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

void gate_refusals::record(const std::string& peer, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_[peer] = why;
}

std::string gate_refusals::take(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = last_.find(peer);
  if (found == last_.end())
    return {};
  auto why = std::move(found->second);
  last_.erase(found);
  return why;
}

caf::io::middleman_actor spawn_cluster_middleman(caf::actor_system& system,
                                                 gate_settings settings) {
  auto factory = std::make_shared<const connection_factory>(system, std::move(settings));
  auto broker = system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached: it blocks in connect; hidden: not counted by await_all_actors_done.
  auto middleman = system.spawn<cluster_middleman_actor, caf::detached + caf::hidden>(
      std::move(broker), factory);
  system.spawn<caf::hidden>(gate_clock, middleman, factory);
  return middleman;
}

} // namespace canopy::actors
