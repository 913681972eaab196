#pragma once
// A command's options as one table: each entry names its flag, the member of the
// options struct it sets, its bounds and its help. --help shows each default read from a
// default-constructed struct, so a default is written once, in the struct's initializer,
// and the flag's name once, here.
// Thread contract: plain values, built and used on main's thread.

#include "cli_args.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::app {

/// How --help writes a count's default.
enum class shown_as { plain, bytes };

/// 16777216 as "16 MiB", 1073741824 as "1 GiB"; a count of bytes that is no whole
/// number of KiB as it is.
std::string bytes_text(std::uint64_t bytes);

template <class Options> class option_table {
public:
  /// --FLAG N sets an integer member: at least `min`, at most what the member holds.
  template <class T>
  option_table& count(std::string flag, std::string value_name, std::string help,
                      T Options::*member, std::uint64_t min = 0,
                      shown_as shown = shown_as::plain, std::string note = {}) {
    static_assert(std::is_integral_v<T> && std::is_unsigned_v<T>);
    auto read = [flag, member, min](const parsed_args& args, Options& o) {
      const auto n = args.count(flag, o.*member, min);
      if (n > std::numeric_limits<T>::max())
        throw usage_error("--" + flag + ": at most " +
                          std::to_string(std::numeric_limits<T>::max()) + " (got " +
                          std::to_string(n) + ")");
      o.*member = static_cast<T>(n);
    };
    auto text = [member, shown](const Options& o) {
      const auto n = static_cast<std::uint64_t>(o.*member);
      return shown == shown_as::bytes ? bytes_text(n) : std::to_string(n);
    };
    return add(std::move(flag), std::move(value_name), std::move(help), read, text,
               std::move(note));
  }

  /// --FLAG MS sets a duration member, at least one millisecond.
  option_table& milliseconds(std::string flag, std::string help,
                             std::chrono::milliseconds Options::*member,
                             std::string note = {}) {
    auto read = [flag, member](const parsed_args& args, Options& o) {
      o.*member = std::chrono::milliseconds(args.count(flag, (o.*member).count(), 1));
    };
    auto text = [member](const Options& o) {
      return std::to_string((o.*member).count());
    };
    return add(std::move(flag), "MS", std::move(help), read, text, std::move(note));
  }

  /// --FLAG VALUE sets a text member.
  option_table& text(std::string flag, std::string value_name, std::string help,
                     std::string Options::*member, std::string note = {}) {
    auto read = [flag, member](const parsed_args& args, Options& o) {
      o.*member = args.text(flag, o.*member);
    };
    auto text = [member](const Options& o) { return o.*member; };
    return add(std::move(flag), std::move(value_name), std::move(help), read, text,
               std::move(note));
  }

  /// --FLAG X sets a number member.
  option_table& number(std::string flag, std::string value_name, std::string help,
                       double Options::*member, std::string note = {}) {
    auto read = [flag, member](const parsed_args& args, Options& o) {
      o.*member = args.number(flag, o.*member);
    };
    auto text = [member](const Options& o) {
      auto s = std::to_string(o.*member);
      s.erase(s.find_last_not_of('0') + 1); // 3.000000 -> 3.
      if (s.back() == '.')
        s.pop_back();
      return s;
    };
    return add(std::move(flag), std::move(value_name), std::move(help), read, text,
               std::move(note));
  }

  /// --FLAG A,B,... sets a list of the names of `names` ("all": every one).
  template <class Enum, std::size_t N>
  option_table& enum_list(std::string flag, std::string help,
                          const std::array<enum_name<Enum>, N>& names,
                          std::vector<Enum> Options::*member) {
    auto read = [flag, &names, member](const parsed_args& args, Options& o) {
      o.*member = parse_enum_list(args, flag, names, o.*member);
    };
    auto text = [&names, member](const Options& o) {
      return comma_separated(
          o.*member, [&](Enum value) { return std::string(name_of(names, value)); });
    };
    return add(std::move(flag), "LIST", std::move(help), read, text, {});
  }

  /// --FLAG 1,2,... sets a list of positive counts.
  option_table& count_list(std::string flag, std::string help,
                           std::vector<std::size_t> Options::*member) {
    auto read = [flag, member](const parsed_args& args, Options& o) {
      if (args.has(flag))
        o.*member = args.positive_counts(flag);
    };
    auto text = [member](const Options& o) {
      return comma_separated(o.*member, [](std::size_t n) { return std::to_string(n); });
    };
    return add(std::move(flag), "LIST", std::move(help), read, text, {});
  }

  /// --FLAG, a switch, sets a member to true.
  option_table& on_off(std::string flag, std::string help, bool Options::*member) {
    auto read = [flag, member](const parsed_args& args, Options& o) {
      o.*member = o.*member || args.has(flag);
    };
    entries_.push_back({{std::move(flag), "", std::move(help)}, read, nullptr, {}});
    return *this;
  }

  /// A flag the command reads itself (a file to load, a list, a switch): its help says
  /// its default, if it has one.
  option_table& other(flag_spec spec) {
    entries_.push_back({std::move(spec), nullptr, nullptr, {}});
    return *this;
  }

  /// The flags, each table entry's help ending "(default X)", "(default X; NOTE)", or
  /// for an empty text "(default: NOTE)".
  std::vector<flag_spec> flags() const {
    const Options defaults{};
    std::vector<flag_spec> out;
    for (const auto& e : entries_) {
      out.push_back(e.spec);
      if (!e.shown_default)
        continue;
      const auto shown = e.shown_default(defaults);
      if (shown.empty()) // an empty text: what it stands for is the note
        out.back().help += " (default: " + (e.note.empty() ? "none" : e.note) + ")";
      else
        out.back().help +=
            " (default " + shown + (e.note.empty() ? "" : "; " + e.note) + ")";
    }
    return out;
  }

  /// Sets every member whose flag `args` holds; the others keep their value in `o`.
  void apply(const parsed_args& args, Options& o) const {
    for (const auto& e : entries_)
      if (e.read)
        e.read(args, o);
  }

private:
  /// "a,b,c": each value as `text` writes it.
  template <class Value, class Text>
  static std::string comma_separated(const std::vector<Value>& values, Text text) {
    std::string out;
    for (const auto& value : values)
      out += (out.empty() ? "" : ",") + text(value);
    return out;
  }

  struct entry {
    flag_spec spec;
    std::function<void(const parsed_args&, Options&)> read; // null: the command's own
    std::function<std::string(const Options&)> shown_default;
    std::string note;
  };

  template <class Read, class Shown>
  option_table& add(std::string flag, std::string value_name, std::string help, Read read,
                    Shown shown, std::string note) {
    entries_.push_back({{std::move(flag), std::move(value_name), std::move(help)},
                        std::move(read),
                        std::move(shown),
                        std::move(note)});
    return *this;
  }

  std::vector<entry> entries_;
};

} // namespace canopy::app
