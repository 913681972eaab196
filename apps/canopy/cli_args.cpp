#include "cli_args.hpp"

#include <canopy/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

namespace canopy::app {

namespace {

std::string canonical(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

bool is_engine_key(const std::string& name) {
  for (const auto& [key, description] : engine_config::describe())
    if (key == name)
      return true;
  return false;
}

engine_config load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw usage_error("--config " + path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return engine_config::from_json(text.str());
  } catch (const canopy::error& e) {
    throw usage_error("--config " + path + ": " + e.what());
  }
}

std::string flag_name(std::string_view flag) {
  return "--" + std::string(flag);
}

void print_flag(std::ostream& out, const std::string& flag, const std::string& help) {
  out << "  " << std::left << std::setw(30) << flag << ' ' << help << '\n';
}

} // namespace

parsed_args parse_args(const std::vector<std::string>& args,
                       const std::vector<flag_spec>& own, engine_settings settings_mode) {
  const bool engine_keys = settings_mode == engine_settings::accepted;
  parsed_args out;
  std::optional<std::string> config_file;
  std::vector<std::pair<std::string, std::string>> settings; // applied after --config
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      return out;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2)
      throw usage_error("unexpected argument '" + arg + "'");
    const auto eq = arg.find('=');
    const std::string written = arg.substr(0, eq);
    const std::string name = canonical(written.substr(2));
    const auto spec = std::find_if(own.begin(), own.end(), [&](const flag_spec& s) {
      return canonical(s.name) == name;
    });
    const bool known =
        spec != own.end() || (engine_keys && (name == "config" || is_engine_key(name)));
    if (!known)
      throw usage_error("unknown flag " + written);
    if (spec != own.end() && spec->value_name.empty()) {
      if (eq != std::string::npos)
        throw usage_error(written + " takes no value");
      out.values_[spec->name] = "";
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      // A following flag is not a value: `--tokens --all-positions` lacks the ids.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        throw usage_error(written + ": missing value");
      value = args[++i];
    }
    if (spec != own.end())
      out.values_[spec->name] = value;
    else if (name == "config")
      config_file = value;
    else
      settings.emplace_back(name, value);
  }
  if (config_file)
    out.config = load_config_file(*config_file);
  for (const auto& [key, value] : settings) {
    try {
      out.config.set(key, value);
    } catch (const canopy::error& e) {
      throw usage_error("--" + key + " " + value + ": " + e.what());
    }
  }
  try {
    out.config.validate();
  } catch (const canopy::error& e) {
    throw usage_error(e.what());
  }
  return out;
}

const std::string* parsed_args::find(std::string_view flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? nullptr : &it->second;
}

bool parsed_args::has(std::string_view flag) const {
  return find(flag) != nullptr;
}

std::string parsed_args::text(std::string_view flag, std::string_view fallback) const {
  const auto* value = find(flag);
  return value ? *value : std::string(fallback);
}

std::uint64_t parsed_args::count(std::string_view flag, std::uint64_t fallback,
                                 std::uint64_t min) const {
  const auto* value = find(flag);
  if (!value)
    return fallback;
  std::uint64_t n = 0;
  const char* end = value->data() + value->size();
  auto [stop, ec] = std::from_chars(value->data(), end, n);
  if (value->empty() || ec != std::errc{} || stop != end)
    throw usage_error(flag_name(flag) + ": expected a non-negative integer, got '" +
                      *value + "'");
  if (n < min)
    throw usage_error(flag_name(flag) + ": must be at least " + std::to_string(min) +
                      " (got " + *value + ")");
  return n;
}

double parsed_args::number(std::string_view flag, double fallback) const {
  const auto* value = find(flag);
  if (!value)
    return fallback;
  char* stop = nullptr;
  const double x = std::strtod(value->c_str(), &stop);
  if (value->empty() || stop != value->c_str() + value->size() || !std::isfinite(x))
    throw usage_error(flag_name(flag) + ": expected a number, got '" + *value + "'");
  return x;
}

std::vector<std::int32_t> parsed_args::ids(std::string_view flag) const {
  const auto* value = find(flag);
  if (!value)
    throw usage_error(flag_name(flag) + " is required");
  if (value->empty())
    throw usage_error(flag_name(flag) + ": no token ids given");
  std::vector<std::int32_t> out;
  for (const auto& piece : names(flag, "")) {
    std::int32_t id = 0;
    const char* end = piece.data() + piece.size();
    auto [stop, ec] = std::from_chars(piece.data(), end, id);
    if (piece.empty() || ec != std::errc{} || stop != end)
      throw usage_error(flag_name(flag) + ": '" + piece +
                        "' is not a token id (expected "
                        "comma-separated integers such as 1,403,407)");
    out.push_back(id);
  }
  return out;
}

std::vector<std::string> parsed_args::names(std::string_view flag,
                                            std::string_view fallback) const {
  const std::string list = text(flag, fallback);
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const auto comma = list.find(',', start);
    out.push_back(list.substr(start, comma - start));
    if (comma == std::string::npos)
      return out;
    start = comma + 1;
  }
}

std::vector<std::size_t> parsed_args::positive_counts(std::string_view flag) const {
  std::vector<std::size_t> out;
  for (const auto& piece : names(flag, "")) {
    std::size_t n = 0;
    const char* end = piece.data() + piece.size();
    auto [stop, ec] = std::from_chars(piece.data(), end, n);
    if (piece.empty() || ec != std::errc{} || stop != end || n == 0)
      throw usage_error(flag_name(flag) + ": '" + piece + "' is not a positive integer");
    out.push_back(n);
  }
  return out;
}

parsed_args parse_command_line(const std::vector<std::string>& args,
                               std::string_view usage, const std::vector<flag_spec>& own,
                               engine_settings settings) {
  auto parsed = parse_args(args, own, settings);
  if (parsed.help)
    print_usage(std::cout, usage, own, settings);
  return parsed;
}

void print_usage(std::ostream& out, std::string_view usage,
                 const std::vector<flag_spec>& own, engine_settings settings) {
  out << usage << "\nOptions:\n";
  for (const auto& s : own)
    print_flag(out, "--" + s.name + (s.value_name.empty() ? "" : " " + s.value_name),
               s.help);
  print_flag(out, "--help", "print this text");
  if (settings == engine_settings::refused)
    return;
  out << '\n';
  print_engine_keys(out);
}

void print_engine_keys(std::ostream& out) {
  const auto defaults = nlohmann::json::parse(engine_config{}.to_json());
  out << "Engine settings (--key value or --key=value; --config FILE applies a JSON "
         "object\n"
         "of them first):\n";
  print_flag(out, "--config FILE",
             "JSON object of engine settings, applied before the flags");
  for (const auto& [key, description] : engine_config::describe())
    print_flag(out, "--" + key + " VALUE",
               description + " (default " + defaults[key].dump() + ")");
}

} // namespace canopy::app
