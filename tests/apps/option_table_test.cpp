// option_table: one table per command's options, its defaults read from the struct.

#include "option_table.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace {

using namespace canopy::app;

enum class colour { red, green, blue };
constexpr std::array<canopy::enum_name<colour>, 3> colour_names{{
    {colour::red, "red"},
    {colour::green, "green"},
    {colour::blue, "blue"},
}};

struct options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::size_t budget_bytes = 16u << 20;
  std::chrono::milliseconds timeout{250};
  double seconds = 2.5;
  std::vector<colour> colours = {colour::red, colour::blue};
  std::vector<std::size_t> counts = {1, 64};
  std::string name; // empty: chosen later
  bool json = false;
};

const option_table<options>& table() {
  using o = options;
  static const auto t =
      option_table<o>()
          .text("host", "H", "address", &o::host, "this machine only")
          .count("port", "P", "port", &o::port)
          .count("budget-bytes", "N", "budget", &o::budget_bytes, 1, shown_as::bytes)
          .milliseconds("timeout-ms", "timeout", &o::timeout)
          .number("seconds", "S", "seconds", &o::seconds)
          .enum_list("colours", "colours", colour_names, &o::colours)
          .count_list("counts", "counts", &o::counts)
          .text("name", "NAME", "name", &o::name, "the file's name")
          .on_off("json", "JSON", &o::json)
          .other({"file", "F", "read by the command"});
  return t;
}

std::string help_of(const std::string& flag) {
  for (const auto& f : table().flags())
    if (f.name == flag)
      return f.help;
  return "no such flag";
}

options parsed(const std::vector<std::string>& argv) {
  options o;
  table().apply(parse_args(argv, table().flags(), engine_settings::refused), o);
  return o;
}

TEST(option_table, help_shows_each_default_from_the_struct) {
  EXPECT_EQ(help_of("host"), "address (default 127.0.0.1; this machine only)");
  EXPECT_EQ(help_of("port"), "port (default 8080)");
  EXPECT_EQ(help_of("budget-bytes"), "budget (default 16 MiB)");
  EXPECT_EQ(help_of("timeout-ms"), "timeout (default 250)");
  EXPECT_EQ(help_of("seconds"), "seconds (default 2.5)");
  EXPECT_EQ(help_of("colours"), "colours (default red,blue)");
  EXPECT_EQ(help_of("counts"), "counts (default 1,64)");
  EXPECT_EQ(help_of("name"), "name (default: the file's name)");
  EXPECT_EQ(help_of("json"), "JSON");
  EXPECT_EQ(help_of("file"), "read by the command");
}

TEST(option_table, absent_flags_keep_the_defaults_and_given_ones_set_their_members) {
  const auto untouched = parsed({});
  EXPECT_EQ(untouched.port, 8080);
  EXPECT_EQ(untouched.colours, (std::vector<colour>{colour::red, colour::blue}));
  EXPECT_FALSE(untouched.json);

  const auto o = parsed({"--host", "::1", "--port", "0", "--budget-bytes=1024",
                         "--timeout-ms", "5", "--seconds", "0.5", "--colours", "green",
                         "--counts", "3,2", "--name", "x", "--json"});
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.budget_bytes, 1024u);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(5));
  EXPECT_EQ(o.seconds, 0.5);
  EXPECT_EQ(o.colours, std::vector<colour>{colour::green});
  EXPECT_EQ(o.counts, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(o.name, "x");
  EXPECT_TRUE(o.json);
}

TEST(option_table, out_of_range_values_are_usage_errors_naming_the_flag) {
  const auto refused = [](std::vector<std::string> argv, const std::string& says) {
    try {
      parsed(argv);
      ADD_FAILURE() << argv[0] << " was taken";
    } catch (const usage_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({"--port", "70000"}, "--port: at most 65535 (got 70000)");
  refused({"--budget-bytes", "0"}, "--budget-bytes: must be at least 1");
  refused({"--timeout-ms", "0"}, "--timeout-ms: must be at least 1");
  refused({"--counts", "1,0"}, "--counts: '0' is not a positive integer");
  refused({"--colours", "mauve"}, "--colours: unknown 'mauve'");
}

TEST(option_table, byte_counts_are_shown_in_the_largest_whole_unit) {
  EXPECT_EQ(bytes_text(1u << 30), "1 GiB");
  EXPECT_EQ(bytes_text(256u << 20), "256 MiB");
  EXPECT_EQ(bytes_text(16u << 10), "16 KiB");
  EXPECT_EQ(bytes_text(1536u << 10), "1536 KiB");
  EXPECT_EQ(bytes_text(1000), "1000");
  EXPECT_EQ(bytes_text(0), "0");
}

} // namespace
