#include <canopy/actors/pass_check.hpp>

namespace canopy::actors {

std::string computed_pass_problem(const backends::pass_request& request,
                                  const messages::computed_pass& result,
                                  std::int64_t vocab) {
  const auto n = [](auto value) { return std::to_string(value); };
  if (result.items.size() != request.items.size())
    return n(result.items.size()) + " items answer a pass of " + n(request.items.size());
  if (result.vocab != static_cast<std::uint64_t>(vocab))
    return "rows of " + n(result.vocab) + " entries from a model of " + n(vocab);
  for (std::size_t i = 0; i < request.items.size(); ++i) {
    const auto& asked = request.items[i];
    const auto& got = result.items[i];
    const auto where = "item " + n(i) + ": ";
    if (!got.kv.empty() && got.kv.size() != asked.tokens.size())
      return where + n(got.kv.size()) + " KV handles for " + n(asked.tokens.size()) +
             " tokens";
    if (!got.rows.empty()) {
      if (got.rows.size() != asked.rows.size())
        return where + n(got.rows.size()) + " rows, " + n(asked.rows.size()) + " asked";
      for (const auto& row : got.rows)
        if (!row.row || row.row->vocab() != result.vocab ||
            row.row->dtype() != result.dtype)
          return where + "a row of another width or dtype";
    } else if (got.values.size() != asked.rows.size() * result.vocab) {
      return where + n(got.values.size()) + " values for " + n(asked.rows.size()) +
             " rows";
    }
  }
  return {};
}

} // namespace canopy::actors
