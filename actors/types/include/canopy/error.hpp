#pragma once
// The exception the C++ API throws (and futures carry): a Canopy error code and a
// message naming what is wrong.
// Thread contract: plain value.

#include <canopy/messages/errors.hpp>

#include <stdexcept>
#include <string>

namespace canopy {

using messages::errc;

class error : public std::runtime_error {
public:
  error(errc code, const std::string& message)
      : std::runtime_error(std::string(messages::to_string(code)) + ": " + message),
        code_(code), message_(message) {}
  errc code() const noexcept { return code_; }
  /// The message alone, without the code what() starts with.
  const std::string& message() const noexcept { return message_; }

private:
  errc code_;
  std::string message_;
};

} // namespace canopy
