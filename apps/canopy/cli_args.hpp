#pragma once
// Command-line flags shared by every subcommand: the subcommand's own flags, and every
// engine_config key as --key value or --key=value, after --config FILE (a JSON object
// of the same keys). Dashes and underscores in flag names are interchangeable.
// Thread contract: plain values and functions, used from main's thread.

#include <canopy/cache/enum_names.hpp>
#include <canopy/engine_config.hpp>

#include <array>

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::app {

/// A bad command line: main prints it with a pointer to --help and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether a subcommand builds an engine. One that does not (make-model) refuses
/// engine settings, so that a mistyped own flag is never silently taken as one.
enum class engine_settings { accepted, refused };

/// One flag of a subcommand.
struct flag_spec {
  std::string name;       // as shown, without dashes: "prompt-length"
  std::string value_name; // "N", "LIST"...; empty for a switch such as --json
  std::string help;
};

/// The command line of one subcommand. Every accessor throws usage_error naming the
/// flag when its value is malformed.
class parsed_args {
public:
  engine_config config; // --config FILE, then each --<key> in order; validated
  bool help = false;    // --help or -h was given (nothing else was parsed)

  bool has(std::string_view flag) const;
  std::string text(std::string_view flag, std::string_view fallback) const;
  /// A non-negative integer of at least `min`.
  std::uint64_t count(std::string_view flag, std::uint64_t fallback,
                      std::uint64_t min = 0) const;
  double number(std::string_view flag, double fallback) const;
  /// A required, non-empty, comma-separated list of token ids ("1,403,407").
  std::vector<std::int32_t> ids(std::string_view flag) const;
  /// A comma-separated list of positive integers ("1,64,512").
  std::vector<std::size_t> positive_counts(std::string_view flag) const;
  /// A comma-separated list of names.
  std::vector<std::string> names(std::string_view flag, std::string_view fallback) const;

private:
  friend parsed_args parse_args(const std::vector<std::string>&,
                                const std::vector<flag_spec>&, engine_settings);
  const std::string* find(std::string_view flag) const;
  std::map<std::string, std::string, std::less<>> values_; // own flags by spec name
};

/// Parses the arguments after the subcommand's name.
parsed_args parse_args(const std::vector<std::string>& args,
                       const std::vector<flag_spec>& own,
                       engine_settings settings = engine_settings::accepted);

/// The opening every subcommand shares: parse_args, and with --help the usage printed
/// to stdout first (the command then returns 0: `if (args.help) return 0;`).
parsed_args parse_command_line(const std::vector<std::string>& args,
                               std::string_view usage, const std::vector<flag_spec>& own,
                               engine_settings settings = engine_settings::accepted);

/// `usage` (synopsis and what the command does), the own flags, then the engine keys
/// (when accepted).
void print_usage(std::ostream& out, std::string_view usage,
                 const std::vector<flag_spec>& own,
                 engine_settings settings = engine_settings::accepted);
/// Every engine_config key with its description and default.
void print_engine_keys(std::ostream& out);

/// --FLAG as a comma-separated list of names of `table`'s values, "all" standing for
/// every one of them; `fallback` when the flag is absent. A usage_error lists the names
/// known otherwise.
template <class Enum, std::size_t N>
std::vector<Enum> parse_enum_list(const parsed_args& args, std::string_view flag,
                                  const std::array<enum_name<Enum>, N>& table,
                                  std::vector<Enum> fallback) {
  if (!args.has(flag))
    return fallback;
  std::vector<Enum> out;
  for (const auto& name : args.names(flag, "all")) {
    if (name == "all") {
      const auto all = values_of(table);
      out.insert(out.end(), all.begin(), all.end());
    } else if (const auto value = value_of(table, name)) {
      out.push_back(*value);
    } else {
      std::string known;
      for (const auto& entry : table)
        known += std::string(entry.name) + ", ";
      throw usage_error("--" + std::string(flag) + ": unknown '" + name +
                        "' (known: " + known + "all)");
    }
  }
  return out;
}

} // namespace canopy::app
