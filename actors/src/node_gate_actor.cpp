#include <canopy/actors/node_gate_actor.hpp>

#include <canopy/messages/errors.hpp>

#include <caf/event_based_actor.hpp>

#include <chrono>
#include <memory>
#include <utility>

namespace canopy::actors {

using namespace messages;

namespace {

using gate_pointer = node_gate_actor::stateful_pointer<node_gate_state>;

void log(gate_pointer self, const std::string& line) {
  if (self->state.options.log)
    self->state.options.log(line);
}

std::string front_name(const worker_link_actor& link) {
  return caf::to_string(link.node());
}

/// Ends a front's session on every device; their KV is freed.
void end_session(gate_pointer self, const caf::actor_addr& link, const std::string& why) {
  auto& st = self->state;
  auto it = st.sessions.find(link);
  if (it == st.sessions.end())
    return;
  const auto token = it->second.token;
  const auto front = front_name(it->second.link);
  st.sessions.erase(it);
  auto freed = std::make_shared<std::uint64_t>(0);
  auto left = std::make_shared<std::size_t>(st.options.devices.size());
  for (const auto& d : st.options.devices)
    self->request(d.handle, std::chrono::seconds(60), session_atom::value,
                  st.options.owner_key, token, false)
        .then(
            [=](std::uint64_t n) {
              *freed += n;
              if (--*left == 0)
                log(self, "session of front " + front + " ended (" + why + "): freed " +
                              std::to_string(*freed) + " KV entries");
            },
            [=](const caf::error&) { --*left; });
}

void forget_challenge(gate_pointer self, const caf::actor_addr& link) {
  auto& st = self->state;
  auto it = st.challenges.find(link);
  if (it == st.challenges.end())
    return;
  st.challenge_order.erase(it->second.number);
  st.challenges.erase(it);
}

caf::result<node_challenge> hello(gate_pointer self, node_hello& h) {
  auto& st = self->state;
  if (st.draining)
    return make_error(errc::shutting_down, "the worker node is leaving");
  if (h.protocol != protocol_version)
    return make_error(errc::invalid_request,
                      "protocol mismatch: the front speaks protocol " +
                          std::to_string(h.protocol) + ", this worker node " +
                          std::to_string(protocol_version));
  if (!h.link || h.nonce.size() < 16)
    return make_error(errc::invalid_request, "a hello needs the front's link and nonce");
  node_challenge c;
  c.nonce = fresh_nonce();
  if (!st.options.secret.empty())
    c.proof = auth_proof(st.options.secret, auth_role::node, h.nonce, c.nonce);
  const auto link = h.link.address();
  forget_challenge(self, link); // a link's new hello replaces its old one
  const auto number = st.next_challenge++;
  st.challenge_order.emplace(number, link);
  st.challenges[link] = {std::move(h.nonce), c.nonce, std::move(h.link), number};
  if (st.challenges.size() > max_pending_challenges)
    forget_challenge(self, st.challenge_order.begin()->second);
  return c;
}

caf::result<node_announcement> auth(gate_pointer self, const auth_bytes& proof) {
  auto& st = self->state;
  const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto it = st.challenges.find(sender);
  if (it == st.challenges.end())
    return make_error(errc::invalid_request, "unauthorized: no hello came first");
  auto challenge = std::move(it->second);
  forget_challenge(self, sender);
  const auto& secret = st.options.secret;
  if (!secret.empty() &&
      !same_proof(proof, auth_proof(secret, auth_role::front, challenge.front_nonce,
                                    challenge.node_nonce))) {
    log(self, "refused front " + front_name(challenge.link) +
                  ": it could not prove the cluster token");
    return make_error(errc::invalid_request,
                      "unauthorized: the front could not prove the cluster token");
  }
  if (st.draining)
    return make_error(errc::shutting_down, "the worker node is leaving");
  // A link that comes back (its node was thought lost) starts afresh.
  end_session(self, sender, "the front connected again");
  node_announcement a;
  const auto token =
      secret.empty() ? random_session_token()
                     : session_token(secret, challenge.front_nonce, challenge.node_nonce);
  a.session = secret.empty() ? token : 0;
  a.devices = st.options.devices;
  // Devices learn of the session before the front can send them anything (the front
  // hears of the devices through this answer, sent after these).
  for (const auto& d : st.options.devices)
    self->request(d.handle, caf::infinite, session_atom::value, st.options.owner_key,
                  token, true)
        .then([](std::uint64_t) {}, [](const caf::error&) {});
  self->monitor(challenge.link);
  log(self, "admitted front " + front_name(challenge.link));
  st.sessions[sender] = {token, std::move(challenge.link)};
  return a;
}

caf::result<bool> ping(gate_pointer self, std::uint64_t token) {
  for (const auto& [link, s] : self->state.sessions)
    if (s.token == token)
      return true;
  return make_error(errc::worker_lost, "the node has no such session (it ended)");
}

/// Once every device has stopped: each front confirms it got everything before.
void finish_drain(gate_pointer self) {
  auto& st = self->state;
  auto left = std::make_shared<std::size_t>(st.sessions.size());
  auto done = [self] {
    for (auto& promise : std::exchange(self->state.drained, {}))
      promise.deliver(true);
  };
  if (*left == 0)
    return done();
  for (const auto& [address, s] : st.sessions)
    self->request(s.link, std::chrono::seconds(2), leave_atom::value)
        .then(
            [=](bool) {
              if (--*left == 0)
                done();
            },
            [=](const caf::error&) {
              if (--*left == 0)
                done();
            });
}

caf::typed_response_promise<bool> drain(gate_pointer self, std::uint64_t key) {
  auto& st = self->state;
  auto promise = self->make_response_promise<bool>();
  if (key != st.options.owner_key) {
    promise.deliver(make_error(errc::invalid_request, "only the node's owner drains it"));
    return promise;
  }
  st.drained.push_back(promise);
  if (st.draining)
    return promise;
  st.draining = true;
  st.challenges.clear();
  st.challenge_order.clear();
  for (const auto& [address, s] : st.sessions)
    self->send(s.link, drain_atom::value);
  st.devices_running = st.options.devices.size();
  for (const auto& d : st.options.devices) {
    self->monitor(d.handle);
    self->send(d.handle, drain_atom::value, st.options.owner_key);
  }
  if (st.devices_running == 0)
    finish_drain(self);
  return promise;
}

void on_down(gate_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (st.draining)
    for (const auto& d : st.options.devices)
      if (d.handle.address() == msg.source && --st.devices_running == 0)
        return finish_drain(self);
  end_session(self, msg.source, "its link went down: " + caf::to_string(msg.reason));
}

} // namespace

node_gate_actor::behavior_type node_gate(gate_pointer self, gate_options options) {
  self->state.options = std::move(options);
  self->set_down_handler([=](caf::down_msg& msg) { on_down(self, msg); });
  return {
      [=](hello_atom, node_hello& h) { return hello(self, h); },
      [=](auth_atom, const auth_bytes& proof) { return auth(self, proof); },
      [=](ping_atom, std::uint64_t token) { return ping(self, token); },
      [=](drain_atom, std::uint64_t key) { return drain(self, key); },
  };
}

} // namespace canopy::actors
