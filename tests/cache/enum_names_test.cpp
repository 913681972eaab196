// One table of names per enum: both directions read the same table.
#include <canopy/cache/enum_names.hpp>
#include <canopy/cache/eviction_policy.hpp>
#include <canopy/cache/logprob_row.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace canopy {
namespace {

enum class colour { red, green, blue };
constexpr std::array<enum_name<colour>, 2> colour_names{{
    {colour::red, "red"},
    {colour::green, "green"},
}};

TEST(enum_names, a_name_and_its_value_come_from_one_table) {
  static_assert(name_of(colour_names, colour::green) == "green");
  static_assert(*value_of(colour_names, "red") == colour::red);
  EXPECT_EQ(name_of(colour_names, colour::blue), "unknown") << "not in the table";
  EXPECT_EQ(name_of(colour_names, colour::blue, "?"), "?");
  EXPECT_FALSE(value_of(colour_names, "blue"));
  EXPECT_FALSE(value_of(colour_names, "Red")) << "names are exact";
  EXPECT_EQ(values_of(colour_names), (std::vector<colour>{colour::red, colour::green}));
}

// Every table of the cache names each value once, and reads back what it writes.
template <class Enum, std::size_t N>
void expect_round_trip(const std::array<enum_name<Enum>, N>& table) {
  std::set<std::string_view> names;
  for (const auto& [value, name] : table) {
    EXPECT_TRUE(names.insert(name).second) << "repeated name " << name;
    EXPECT_EQ(value_of(table, name), value);
    EXPECT_EQ(name_of(table, value), name);
  }
}

TEST(enum_names, the_caches_tables_round_trip) {
  expect_round_trip(cache::eviction_policy_names);
  expect_round_trip(cache::row_dtype_names);
  EXPECT_EQ(cache::to_string(cache::eviction_policy::priority), "priority");
  EXPECT_EQ(cache::parse_row_dtype("bfloat16"), cache::row_dtype::bfloat16);
  EXPECT_FALSE(cache::parse_eviction_policy("LRU"));
}

} // namespace
} // namespace canopy
