#pragma once
// What an exception from a backend says, for an error message: LibTorch's c10::Error
// carries the C++ stack trace of where it was thrown in what(), which is for LibTorch's
// developers, not for a client reading why its query failed (internal to canopy_actors).
// Thread contract: a pure function.

#include <exception>
#include <string>

namespace canopy::actors {

/// e.what(), without the backtrace when `e` is a c10::Error.
std::string exception_text(const std::exception& e);

} // namespace canopy::actors
