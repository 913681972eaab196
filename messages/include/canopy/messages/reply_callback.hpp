#pragma once
// A callback that receives a query's answer on the request actor's thread. It holds
// a std::function, so it never crosses a process boundary (in-process callers only).
// Thread contract: invoked exactly once, from one actor thread; keep it short.

#include <canopy/messages/shared_logprobs.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>

#include <functional>

namespace canopy::messages {

struct reply_callback {
  std::function<void(caf::expected<shared_logprobs>)> fn;
};

} // namespace canopy::messages

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::messages::reply_callback)
