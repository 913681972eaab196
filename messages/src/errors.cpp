#include <canopy/messages/errors.hpp>

#include <caf/make_message.hpp>

namespace canopy::messages {

std::string_view to_string(errc code) {
  return name_of(errc_names, code);
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
