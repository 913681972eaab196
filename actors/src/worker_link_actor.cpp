#include <canopy/actors/worker_link_actor.hpp>

#include <canopy/actors/cluster_auth.hpp>
#include <canopy/actors/remote_worker_proxy.hpp>
#include <canopy/messages/errors.hpp>

#include <caf/actor_system.hpp>

#include <algorithm>
#include <set>

namespace canopy::actors {

using namespace messages;

namespace {

using link_pointer = worker_link_actor::stateful_pointer<worker_link_state>;

node_metrics& figures(link_pointer self) {
  return self->state.metrics->node(self->state.options.node_index);
}

/// The node's devices, proxies and gate are no more: the proxies die (the batcher
/// re-dispatches their passes) and nothing is monitored.
void drop(link_pointer self, caf::exit_reason reason) {
  auto& st = self->state;
  for (auto& p : st.proxies)
    self->send_exit(p, reason);
  if (st.gate)
    self->demonitor(st.gate.address());
  for (auto& d : st.devices)
    self->demonitor(d.address());
  st.proxies.clear();
  st.devices.clear();
  st.gate = nullptr;
  st.admitted = false;
}

void conclude(link_pointer self) {
  auto& st = self->state;
  st.concluded = true;
  for (auto& promise : std::exchange(st.waiting, {}))
    promise.deliver(true);
}

void retry_after(link_pointer self, caf::timespan delay) {
  self->delayed_send(self, delay, connect_atom::value, self->state.attempt);
}

/// The attempt ended without admission: the node is `state`, for `why`.
void give_up(link_pointer self, const std::string& state, const std::string& why) {
  auto& st = self->state;
  drop(self, caf::exit_reason::user_shutdown);
  figures(self).set_state(state, why);
  // A refused node is refused until someone changes it: no point in hurrying.
  st.backoff =
      state == "refused"
          ? caf::timespan{longest_backoff}
          : std::min<caf::timespan>(
                longest_backoff, std::max<caf::timespan>(first_backoff, st.backoff * 2));
  retry_after(self, st.backoff);
  conclude(self);
}

void lose(link_pointer self, const std::string& why) {
  auto& st = self->state;
  if (!st.admitted)
    return give_up(self, "unreachable", why);
  bump(figures(self).losses);
  drop(self, caf::exit_reason::remote_link_unreachable);
  figures(self).set_state("lost", why);
  st.backoff = first_backoff;
  retry_after(self, st.backoff);
}

std::string node_says(const caf::error& e) {
  const auto message = message_of(e);
  return message.empty() ? caf::to_string(e) : message;
}

// Note [loss detection]: a heartbeat leaves heartbeat_interval after the last one was
// answered and may take heartbeat_patience; a node that stops answering is lost at
// most interval + patience = 0.7 worker_timeout after it stopped, so within the
// timeout even on a busy machine, while a node busy computing still has half the
// timeout to answer.
caf::timespan heartbeat_interval(const link_options& o) {
  return o.timeout / 5;
}
caf::timespan heartbeat_patience(const link_options& o) {
  return o.timeout / 2;
}

void schedule_ping(link_pointer self) {
  self->delayed_send(self, heartbeat_interval(self->state.options), ping_atom::value,
                     self->state.attempt);
}

void heartbeat_answered(link_pointer self) {
  auto& st = self->state;
  const auto now = heartbeat_clock_ns();
  figures(self).last_heartbeat_ns.store(now, std::memory_order_relaxed);
  for (auto w : st.slots)
    st.metrics->worker(w).last_heartbeat_ns.store(now, std::memory_order_relaxed);
}

void admitted(link_pointer self) {
  auto& st = self->state;
  st.admitted = true;
  st.backoff = caf::timespan{0};
  bump(figures(self).admissions);
  figures(self).set_state("admitted");
  heartbeat_answered(self);
  schedule_ping(self);
  conclude(self);
}

/// Makes every device join the batcher through a proxy of its own.
void join_devices(link_pointer self, const node_announcement& a) {
  auto& st = self->state;
  const auto attempt = st.attempt;
  st.slots.resize(std::max(st.slots.size(), a.devices.size()), new_slot);
  auto left = std::make_shared<std::size_t>(a.devices.size());
  auto refusal = std::make_shared<std::string>();
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    const auto& d = a.devices[i];
    auto proxy = self->spawn(remote_worker_proxy, d.handle, st.session, d.model);
    self->link_to(proxy); // it dies with the link
    self->monitor(d.handle);
    st.devices.push_back(d.handle);
    st.proxies.push_back(proxy);
    worker_description description{d.model, d.kv_budget_bytes, st.options.address,
                                   d.device, st.slots[i]};
    auto joined = [=] {
      if (--*left != 0 || self->state.attempt != attempt)
        return;
      if (refusal->empty())
        admitted(self);
      else
        give_up(self, "refused", *refusal);
    };
    self->request(st.batcher, st.options.timeout, join_atom::value, proxy, description)
        .then(
            [=](cache::worker_id w) {
              if (self->state.attempt == attempt)
                self->state.slots[i] = w;
              joined();
            },
            [=](const caf::error& e) {
              *refusal = node_says(e);
              joined();
            });
  }
  if (a.devices.empty())
    give_up(self, "refused", "the node announced no device");
}

void authenticate(link_pointer self, const auth_bytes& front_nonce, node_challenge& c) {
  auto& st = self->state;
  const auto attempt = st.attempt;
  const auto& secret = st.options.secret;
  const auto& at = st.options.address;
  if (c.protocol != protocol_version)
    return give_up(self, "refused",
                   "protocol mismatch: this front speaks protocol " +
                       std::to_string(protocol_version) + ", the node at " + at +
                       " speaks " + std::to_string(c.protocol));
  if (secret.empty() && !c.proof.empty())
    return give_up(self, "refused",
                   "the node at " + at +
                       " requires a cluster token and this "
                       "front has none (cluster_token_file)");
  if (!secret.empty() && c.proof.empty())
    return give_up(self, "refused",
                   "the node at " + at +
                       " has no cluster token and this "
                       "front requires one");
  if (!secret.empty() &&
      !same_proof(c.proof, auth_proof(secret, auth_role::node, front_nonce, c.nonce)))
    return give_up(self, "refused",
                   "the node at " + at +
                       " could not prove the cluster "
                       "token (the tokens differ)");
  const auto proof = secret.empty()
                         ? auth_bytes{}
                         : auth_proof(secret, auth_role::front, front_nonce, c.nonce);
  const auto node_nonce = c.nonce;
  self->request(st.gate, st.options.timeout, auth_atom::value, proof)
      .then(
          [=](node_announcement& a) {
            auto& st = self->state;
            if (st.attempt != attempt)
              return;
            st.session = st.options.secret.empty()
                             ? a.session
                             : session_token(st.options.secret, front_nonce, node_nonce);
            join_devices(self, a);
          },
          [=](const caf::error& e) {
            if (self->state.attempt == attempt)
              give_up(self, "refused", "the node at " + at + " refused: " + node_says(e));
          });
}

void greet(link_pointer self, const caf::strong_actor_ptr& ptr,
           const std::set<std::string>& interface) {
  auto& st = self->state;
  const auto attempt = st.attempt;
  if (!ptr)
    return give_up(self, "unreachable", "nothing is published at " + st.options.address);
  if (interface != self->system().message_types<node_gate_actor>())
    return give_up(
        self, "refused",
        "the process at " + st.options.address + " is not a canopy worker of protocol " +
            std::to_string(protocol_version) + " (its published interface differs)");
  st.gate = caf::actor_cast<node_gate_actor>(ptr);
  self->monitor(st.gate);
  auto nonce = fresh_nonce();
  self->request(st.gate, st.options.timeout, hello_atom::value,
                node_hello{protocol_version, nonce, self})
      .then(
          [=](node_challenge& c) {
            if (self->state.attempt == attempt)
              authenticate(self, nonce, c);
          },
          [=](const caf::error& e) {
            if (self->state.attempt == attempt)
              give_up(self, code_of(e) == errc::none ? "unreachable" : "refused",
                      "the node at " + self->state.options.address + ": " + node_says(e));
          });
}

void connect(link_pointer self) {
  auto& st = self->state;
  drop(self, caf::exit_reason::user_shutdown);
  const auto attempt = ++st.attempt;
  self->request(st.options.middleman, st.options.timeout, connect_atom::value,
                st.options.host, st.options.port)
      .then(
          [=](const caf::node_id&, caf::strong_actor_ptr& ptr,
              std::set<std::string>& interface) {
            if (self->state.attempt == attempt)
              greet(self, ptr, interface);
          },
          [=](const caf::error& e) {
            if (self->state.attempt != attempt)
              return;
            const auto& o = self->state.options;
            // The gate (cluster_middleman.hpp) says why it turned the node away, if it
            // did.
            const auto why =
                o.refusals ? o.refusals->take(peer_label(o.host, o.port)) : "";
            if (!why.empty())
              return give_up(self, "refused", "the node at " + o.address + " " + why);
            give_up(self, "unreachable",
                    "cannot connect to " + o.address + ": " + self->system().render(e));
          });
}

void ping(link_pointer self) {
  auto& st = self->state;
  const auto attempt = st.attempt;
  self->request(st.gate, heartbeat_patience(st.options), ping_atom::value, st.session)
      .then(
          [=](bool) {
            if (self->state.attempt != attempt || !self->state.admitted)
              return;
            heartbeat_answered(self);
            schedule_ping(self);
          },
          [=](const caf::error& e) {
            if (self->state.attempt == attempt && self->state.admitted)
              lose(self, "no heartbeat answer within " +
                             std::to_string(
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     heartbeat_patience(self->state.options))
                                     .count()) +
                             " ms: " + node_says(e));
          });
}

bool from_gate(link_pointer self) {
  const auto& st = self->state;
  return st.gate &&
         self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(st.gate);
}

} // namespace

worker_link_actor::behavior_type worker_link(link_pointer self, link_options options,
                                             batcher_actor batcher,
                                             std::shared_ptr<engine_metrics> metrics) {
  auto& st = self->state;
  st.options = std::move(options);
  st.batcher = std::move(batcher);
  st.metrics = std::move(metrics);
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    const bool ours = (st.gate && msg.source == st.gate.address()) ||
                      std::any_of(st.devices.begin(), st.devices.end(),
                                  [&](const node_device_actor& d) {
                                    return d.address() == msg.source;
                                  });
    if (ours)
      lose(self, "the connection to " + st.options.address + " dropped (" +
                     caf::to_string(msg.reason) + ")");
  });
  self->send(self, connect_atom::value, st.attempt);
  return {
      [=](connect_atom, std::uint64_t attempt) {
        if (attempt == self->state.attempt)
          connect(self);
      },
      [=](ping_atom, std::uint64_t attempt) {
        if (attempt == self->state.attempt && self->state.admitted)
          ping(self);
      },
      [=](drain_atom) {
        if (!from_gate(self))
          return;
        figures(self).set_state("draining");
        for (auto w : self->state.slots)
          if (w != new_slot)
            self->send(self->state.batcher, drain_atom::value, w);
      },
      [=](leave_atom) -> caf::result<bool> {
        if (!from_gate(self))
          return make_error(errc::invalid_request, "only the node's gate says it leaves");
        return true;
      },
      [=](wait_atom) -> caf::result<bool> {
        if (self->state.concluded)
          return true;
        auto promise = self->make_response_promise<bool>();
        self->state.waiting.push_back(promise);
        return promise;
      },
  };
}

} // namespace canopy::actors
