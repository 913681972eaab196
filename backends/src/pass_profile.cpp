#include <canopy/backends/pass_profile.hpp>

namespace canopy::backends {

void pass_profile::add(std::string_view name, std::uint64_t ns) {
  for (auto& p : parts)
    if (p.name == name) {
      p.ns += ns;
      return;
    }
  parts.push_back({std::string(name), ns});
}

profile_clock::profile_clock(pass_profile* profile) : profile_(profile) {
  if (profile_)
    last_ = std::chrono::steady_clock::now();
}

void profile_clock::lap(std::string_view name) {
  if (!profile_)
    return;
  const auto now = std::chrono::steady_clock::now();
  profile_->add(
      name,
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count()));
  last_ = now;
}

void profile_clock::lap(std::int64_t layer, std::string_view name) {
  if (!profile_)
    return;
  lap("layer " + std::to_string(layer) + ": " + std::string(name));
}

} // namespace canopy::backends
