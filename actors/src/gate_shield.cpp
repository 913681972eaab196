// A node gate's shield (see gate_shield.hpp).
#include <canopy/actors/gate_shield.hpp>

#include <caf/actor_cast.hpp>
#include <caf/make_actor.hpp>
#include <caf/monitorable_actor.hpp>

namespace canopy::actors {

namespace {

class gate_shield final : public caf::monitorable_actor {
public:
  gate_shield(caf::strong_actor_ptr gate, std::set<std::string> interface)
      : monitorable_actor(caf::actor_config{}.add_flag(is_actor_dot_decorator_flag)),
        gate_(std::move(gate)), interface_(std::move(interface)) {}

  const char* name() const override { return "canopy.gate_shield"; }

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    // A peer's: the shield links to and monitors nothing, so none is genuine.
    const auto& content = what->content();
    if (content.match_element<caf::exit_msg>(0) ||
        content.match_element<caf::down_msg>(0))
      return;
    gate_->enqueue(std::move(what), host); // a gate that ended bounces requests
  }

  std::set<std::string> message_types() const override { return interface_; }

private:
  caf::strong_actor_ptr gate_;
  std::set<std::string> interface_;
};

} // namespace

caf::strong_actor_ptr shield_gate(caf::actor_system& system,
                                  const messages::node_gate_actor& gate) {
  return caf::make_actor<gate_shield, caf::strong_actor_ptr>(
      system.next_actor_id(), system.node(), &system,
      caf::actor_cast<caf::strong_actor_ptr>(gate), system.message_types(gate));
}

} // namespace canopy::actors
