#pragma once
// Canopy's error codes and their caf::error form. Every failure a caller can see is
// one of these codes with a message naming what is wrong.
// Thread contract: plain values and pure functions.

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <canopy/cache/enum_names.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::messages {

enum class errc : std::uint8_t {
  none = 0,
  empty_sequence,     // a query with no tokens
  token_out_of_range, // a token id outside [0, vocab)
  sequence_too_long,  // longer than the model's context
  invalid_config,     // a malformed configuration
  backend_failure,    // a forward pass failed (the backend's message follows)
  cancelled,          // reset_async_queries() cancelled the query
  deadline_exceeded,  // the query's deadline passed before its answer
  worker_lost,        // the worker running the query died
  no_workers,         // no live worker can run the query
  shutting_down,      // the engine stopped before answering
  invalid_request,    // a malformed request of another kind
  no_tokenizer,       // text was given but the model has no tokenizer (use token ids)
  unknown_adapter,    // a query or call names a LoRA adapter that is not loaded
};

/// The category under which Canopy errors travel in caf::error.
inline constexpr caf::atom_value error_category = caf::atom("canopy");

/// Their names: the codes of the HTTP API's errors.
inline constexpr std::array<enum_name<errc>, 14> errc_names{{
    {errc::none, "none"},
    {errc::empty_sequence, "empty_sequence"},
    {errc::token_out_of_range, "token_out_of_range"},
    {errc::sequence_too_long, "sequence_too_long"},
    {errc::invalid_config, "invalid_config"},
    {errc::backend_failure, "backend_failure"},
    {errc::cancelled, "cancelled"},
    {errc::deadline_exceeded, "deadline_exceeded"},
    {errc::worker_lost, "worker_lost"},
    {errc::no_workers, "no_workers"},
    {errc::shutting_down, "shutting_down"},
    {errc::invalid_request, "invalid_request"},
    {errc::no_tokenizer, "no_tokenizer"},
    {errc::unknown_adapter, "unknown_adapter"},
}};

std::string_view to_string(errc code);

caf::error make_error(errc code);
caf::error make_error(errc code, std::string message);

/// The errc of a caf::error of Canopy's category; errc::none for other categories.
errc code_of(const caf::error& error);
/// The message part of a caf::error ("" when it has none).
std::string message_of(const caf::error& error);

} // namespace canopy::messages
