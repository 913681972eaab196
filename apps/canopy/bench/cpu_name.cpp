#include "bench/cpu_name.hpp"

#include <canopy/backends/models/torch_backend.hpp>

#include <fstream>
#include <sstream>

namespace canopy::app {

namespace {

/// The value after "key\t: " on the first line that starts with `key`.
std::string first_value(std::istream& in, const std::string& key) {
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos
                 ? ""
                 : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  return (" " + flags + " ").find(" " + flag + " ") != std::string::npos;
}

} // namespace

std::string cpu_name() {
  std::ifstream info("/proc/cpuinfo");
  if (!info)
    return "unknown CPU";
  // The keys in /proc/cpuinfo's order, each read from where the last one was found.
  const auto family = first_value(info, "cpu family");
  const auto model = first_value(info, "model\t");
  const auto name = first_value(info, "model name");
  const auto flags = first_value(info, "flags");
  std::ostringstream out;
  out << (name.empty() ? "unknown CPU" : name);
  if (!family.empty() &&
      !model.empty()) // a virtual machine's name may omit the generation
    out << ", family " << family << " model " << model;
  out << " (";
  if (has_flag(flags, "avx512f"))
    out << (has_flag(flags, "avx512_vnni") ? "AVX-512 with VNNI"
                                           : "AVX-512 without VNNI");
  else
    out << (has_flag(flags, "avx2") ? "AVX2, no AVX-512" : "no AVX2");
  out << ")";
  return out.str();
}

std::string cpu_kernels() {
  return backends::cpu_kernels_here();
}

} // namespace canopy::app
