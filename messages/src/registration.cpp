#include <canopy/messages/registration.hpp>

#include <canopy/messages/actor_interfaces.hpp>
#include <canopy/messages/batch_messages.hpp>
#include <canopy/messages/cache_view_messages.hpp>
#include <canopy/messages/computed_pass.hpp>
#include <canopy/messages/errors.hpp>
#include <canopy/messages/node_messages.hpp>
#include <canopy/messages/pass_messages.hpp>
#include <canopy/messages/query.hpp>
#include <canopy/messages/shared_logprobs.hpp>

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include <string>
#include <vector>

namespace canopy::messages {

namespace {

std::string render_error(std::uint8_t code, caf::atom_value,
                         const caf::message& context) {
  std::string out = "canopy: ";
  out += to_string(static_cast<errc>(code));
  if (context.size() == 1 && context.match_element<std::string>(0)) {
    out += " (";
    out += context.get_as<std::string>(0);
    out += ")";
  }
  return out;
}

} // namespace

void add_message_types(caf::actor_system_config& config) {
  config.add_message_type<query>("canopy::query");
  config.add_message_type<shared_logprobs>("canopy::shared_logprobs");
  config.add_message_type<std::vector<shared_logprobs>>("canopy::shared_logprobs_list");
  config.add_message_type<answer_batch>("canopy::answer_batch");
  config.add_message_type<backends::pass_item>("canopy::pass_item");
  config.add_message_type<backends::pass_request>("canopy::pass_request");
  config.add_message_type<backends::model_info>("canopy::model_info");
  config.add_message_type<backends::mock_options>("canopy::mock_options");
  config.add_message_type<backends::torch_options>("canopy::torch_options");
  config.add_message_type<backends::backend_spec>("canopy::backend_spec");
  config.add_message_type<backends::lora_adapter_files>("canopy::lora_adapter_files");
  config.add_message_type<cache::row_dtype>("canopy::row_dtype");
  config.add_message_type<computed_item>("canopy::computed_item");
  config.add_message_type<computed_pass>("canopy::computed_pass");
  config.add_message_type<worker_description>("canopy::worker_description");
  config.add_message_type<worker_actor>("canopy::worker_actor");
  config.add_message_type<worker_link_actor>("canopy::worker_link_actor");
  config.add_message_type<node_device_actor>("canopy::node_device_actor");
  config.add_message_type<node_hello>("canopy::node_hello");
  config.add_message_type<node_challenge>("canopy::node_challenge");
  config.add_message_type<device_announcement>("canopy::device_announcement");
  config.add_message_type<node_announcement>("canopy::node_announcement");
  config.add_message_type<std::vector<std::uint8_t>>("canopy::bytes");
  config.add_message_type<cache::kv_prefix>("canopy::kv_prefix");
  config.add_message_type<prepare_request>("canopy::prepare_request");
  config.add_message_type<prepared_entry>("canopy::prepared_entry");
  config.add_message_type<prepared_batch>("canopy::prepared_batch");
  config.add_message_type<store_item>("canopy::store_item");
  config.add_message_type<store_request>("canopy::store_request");
  config.add_message_type<std::vector<cache::kv_handle>>("canopy::kv_handles");
  config.add_message_type<std::vector<cache::node_id>>("canopy::node_ids");
  config.add_message_type<cache::token_seq>("canopy::token_seq");
  config.add_message_type<std::vector<query>>("canopy::queries");
  config.add_message_type<std::vector<std::string>>("canopy::strings");
  config.add_message_type<cache::trie_view>("canopy::trie_view");
  config.add_message_type<cache::trie_view_limits>("canopy::trie_view_limits");
  config.add_error_category(error_category, render_error);
}

} // namespace canopy::messages
