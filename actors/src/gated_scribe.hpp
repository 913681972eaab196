#pragma once
// A connection as CAF's BASP broker sees it (a scribe), behind connection_gate.hpp's
// challenge-response, and the list of connections still waiting at the gate (internal
// to canopy_actors; see cluster_middleman.hpp).
//
// Until the gate passes, what BASP writes is held back and what it asks to read is
// remembered; the stream reads exactly what the gate wants and hands it to the gate, not
// to BASP. Once passed, the held bytes go out after the gate's last answer, BASP's read
// setting takes effect, and every byte after that is BASP's, as on CAF's own scribes.
// Thread contract: everything here runs on CAF's multiplexer thread.

#include <canopy/actors/connection_gate.hpp>

#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace canopy::actors::detail {

namespace net = caf::io::network;

/// What the waiting list needs of a connection, whatever its I/O policy.
class gated_connection : public caf::io::scribe {
public:
  using scribe::scribe;
  /// Passed, refused, or closed: no longer the waiting list's concern.
  virtual bool settled() const = 0;
  /// Closes a connection that has not passed (its time is up).
  virtual void expire(caf::execution_unit* ctx) = 0;
};

/// The connections waiting at the gate, oldest first (all wait as long).
class pending_gates {
public:
  pending_gates(std::chrono::milliseconds timeout, std::size_t max_pending)
      : timeout_(timeout), max_pending_(max_pending) {}

  void add(caf::intrusive_ptr<gated_connection> connection, caf::execution_unit* ctx) {
    sweep(ctx);
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [](const entry& e) { return e.connection->settled(); }),
                   waiting_.end());
    if (waiting_.size() >= max_pending_) { // the oldest gives way
      waiting_.front().connection->expire(ctx);
      waiting_.pop_front();
    }
    waiting_.push_back(
        {std::chrono::steady_clock::now() + timeout_, std::move(connection)});
  }

  /// Closes every connection still waiting (its middleman has ended: nothing would
  /// sweep them any more, and BASP would wait on each for good, holding the middleman).
  void expire_all(caf::execution_unit* ctx) {
    for (auto& waiting : waiting_)
      waiting.connection->expire(ctx);
    waiting_.clear();
  }

  /// Drops the settled ones at the front and closes those whose time is up.
  void sweep(caf::execution_unit* ctx) {
    const auto now = std::chrono::steady_clock::now();
    while (!waiting_.empty() &&
           (waiting_.front().connection->settled() || waiting_.front().deadline <= now)) {
      waiting_.front().connection->expire(ctx);
      waiting_.pop_front();
    }
  }

private:
  struct entry {
    std::chrono::steady_clock::time_point deadline;
    caf::intrusive_ptr<gated_connection> connection;
  };
  std::chrono::milliseconds timeout_;
  std::size_t max_pending_;
  std::deque<entry> waiting_;
};

/// A connection behind the gate; `Policy` reads and writes the socket (plain TCP, or a
/// TLS session).
template <class Policy> class gated_scribe final : public gated_connection {
public:
  /// `refused(why)` is told why the gate turned the peer away, once.
  template <class... Ts>
  gated_scribe(net::default_multiplexer& mpx, net::native_socket fd, connection_gate gate,
               std::shared_ptr<pending_gates> pending,
               std::function<void(const std::string&)> refused, Ts&&... policy_args)
      : gated_connection(net::conn_hdl_from_socket(fd)),
        stream_(mpx, fd, std::forward<Ts>(policy_args)...), gate_(std::move(gate)),
        pending_(std::move(pending)), refused_(std::move(refused)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    basp_read_ = config;
    if (gate_.passed()) {
      stream_.configure_read(config);
      return;
    }
    if (launched_)
      return;
    launched_ = true;
    stream_.configure_read(caf::io::receive_policy::exactly(gate_.wanted()));
    stream_.start(this);
    const auto opening = gate_.opening();
    stream_.write(opening.data(), opening.size());
    // An empty write first: over TLS it starts the handshake on the side that must
    // speak first; the opening follows once that write is done.
    stream_.force_empty_write(this);
    pending_->add(caf::intrusive_ptr<gated_connection>(this), &stream_.backend());
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t size) override {
    if (gate_.passed())
      return scribe::consume(ctx, buf, size);
    if (detached())
      return false;
    const auto answer = gate_.take(static_cast<const char*>(buf), size);
    if (gate_.failed()) {
      refuse(ctx, gate_.failure());
      return false;
    }
    stream_.write(answer.data(), answer.size());
    if (gate_.passed()) {
      stream_.write(held_.data(), held_.size());
      held_ = {};
      stream_.configure_read(basp_read_);
    } else {
      stream_.configure_read(caf::io::receive_policy::exactly(gate_.wanted()));
    }
    stream_.flush(this);
    return true;
  }

  bool settled() const override { return gate_.passed() || gate_.failed() || detached(); }

  void expire(caf::execution_unit* ctx) override {
    if (!settled())
      refuse(ctx, "did not finish the cluster handshake in time");
  }

  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override {
    return gate_.passed() ? stream_.wr_buf() : held_;
  }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void flush() override {
    if (gate_.passed())
      stream_.flush(this);
  }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  std::string addr() const override {
    auto a = net::remote_addr_of_fd(stream_.fd());
    return a ? *a : std::string{};
  }
  std::uint16_t port() const override {
    auto p = net::remote_port_of_fd(stream_.fd());
    return p ? *p : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override {
    // Closed by the peer (or by BASP) while the gate was still waiting on it.
    if (launched_ && !gate_.passed() && !gate_.failed())
      report(gate_.why_closed());
    stream_.passivate();
  }

private:
  /// Tells BASP the connection failed (it forgets it, and a pending connect fails) and
  /// closes the socket once what is queued is written.
  void refuse(caf::execution_unit* ctx, const std::string& why) {
    report(why);
    io_failure(ctx, net::operation::read);
    stream_.graceful_shutdown();
  }

  void report(const std::string& why) {
    if (refused_ && !reported_)
      refused_(why);
    reported_ = true;
  }

  net::stream_impl<Policy> stream_;
  connection_gate gate_;
  std::shared_ptr<pending_gates> pending_;
  std::function<void(const std::string&)> refused_;
  bool reported_ = false;
  caf::io::receive_policy::config basp_read_ = caf::io::receive_policy::at_most(1024);
  std::vector<char> held_; // what BASP wrote before the gate passed
  bool launched_ = false;
};

} // namespace canopy::actors::detail
