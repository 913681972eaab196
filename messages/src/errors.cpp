#include <canopy/messages/errors.hpp>

#include <caf/make_message.hpp>

namespace canopy::messages {

std::string_view to_string(errc code) {
  switch (code) {
  case errc::none:
    return "none";
  case errc::empty_sequence:
    return "empty_sequence";
  case errc::token_out_of_range:
    return "token_out_of_range";
  case errc::sequence_too_long:
    return "sequence_too_long";
  case errc::invalid_config:
    return "invalid_config";
  case errc::backend_failure:
    return "backend_failure";
  case errc::cancelled:
    return "cancelled";
  case errc::deadline_exceeded:
    return "deadline_exceeded";
  case errc::worker_lost:
    return "worker_lost";
  case errc::no_workers:
    return "no_workers";
  case errc::shutting_down:
    return "shutting_down";
  case errc::invalid_request:
    return "invalid_request";
  case errc::no_tokenizer:
    return "no_tokenizer";
  }
  return "unknown";
}

caf::error make_error(errc code) {
  return caf::error{static_cast<std::uint8_t>(code), error_category};
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

errc code_of(const caf::error& error) {
  if (error.category() != error_category)
    return errc::none;
  return static_cast<errc>(error.code());
}

std::string message_of(const caf::error& error) {
  const auto& context = error.context();
  if (context.size() == 1 && context.match_element<std::string>(0))
    return context.get_as<std::string>(0);
  return {};
}

} // namespace canopy::messages
