#pragma once
// Where a backend's passes spend their time, part by part, summed over the passes run
// while the profile is attached (backend_i::attach_profile; `canopy bench --profile`
// prints it). Reading the clock costs ~20 ns a part, so only a profiled pass reads it.
// Thread contract: written by the backend's thread while attached; read after.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::backends {

struct pass_profile {
  struct part {
    std::string name;
    std::uint64_t ns = 0;
  };
  std::vector<part> parts; // in the order first seen
  std::uint64_t passes = 0;

  void add(std::string_view name, std::uint64_t ns);
};

/// Laps of one pass into a profile; does nothing when the profile is null.
class profile_clock {
public:
  explicit profile_clock(pass_profile* profile);
  /// Charges the time since the last lap (or construction) to `name`.
  void lap(std::string_view name);
  /// The same, for a part of layer `layer`: "layer N: name".
  void lap(std::int64_t layer, std::string_view name);

private:
  pass_profile* profile_;
  std::chrono::steady_clock::time_point last_;
};

} // namespace canopy::backends
