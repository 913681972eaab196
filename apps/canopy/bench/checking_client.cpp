#include "bench/checking_client.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <variant>

namespace canopy::app {

namespace {

/// The reference row, rounded to `dtype` as the engine rounds what it stores.
std::vector<float> rounded(std::vector<float> row, const std::string& dtype) {
  if (dtype == "float32")
    return row;
  // ATen's own round-to-nearest-even, independent of the cache's converters.
  const auto storage = dtype == "float16" ? at::kHalf : at::kBFloat16;
  auto rounded =
      at::from_blob(row.data(), {static_cast<std::int64_t>(row.size())}, at::kFloat)
          .to(storage)
          .to(at::kFloat);
  std::memcpy(row.data(), rounded.data_ptr<float>(), row.size() * sizeof(float));
  return row;
}

/// Rounding to float16/bfloat16 may land the engine's value and the reference's on
/// either side of a rounding boundary: one unit in the last place, relative.
double relative_slack(const std::string& dtype) {
  return dtype == "float16" ? 1.0 / 1024 : dtype == "bfloat16" ? 1.0 / 128 : 0.0;
}

/// What differs between an engine's row and the reference, or "" when nothing does.
std::string difference(const at::Tensor& row, const std::vector<float>& expected,
                       const check_rule& rule) {
  std::ostringstream what;
  what.precision(9);
  if (row.scalar_type() != at::kFloat ||
      row.numel() != static_cast<std::int64_t>(expected.size())) {
    what << row.numel() << " entries of " << row.scalar_type() << ", expected "
         << expected.size() << " float32";
    return what.str();
  }
  const float* values = row.data_ptr<float>();
  const bool exact = rule.tolerance_abs == 0 && rule.tolerance_rel == 0;
  const double slack = relative_slack(rule.dtype) + rule.tolerance_rel;
  for (std::size_t v = 0; v < expected.size(); ++v) {
    const bool same =
        exact ? std::memcmp(values + v, &expected[v], sizeof(float)) == 0
              : std::fabs(double(values[v]) - double(expected[v])) <=
                    rule.tolerance_abs + slack * std::fabs(double(expected[v]));
    if (!same) {
      what << "entry " << v << " is " << values[v] << ", the reference " << expected[v];
      if (!exact)
        what << " (tolerance " << rule.tolerance_abs << " + " << slack
             << " x |reference|)";
      return what.str();
    }
  }
  return "";
}

} // namespace

checking_client::checking_client(query_client& inner, check_rule rule, std::size_t every)
    : inner_(inner), rule_(std::move(rule)), every_(every) {}

void checking_client::ask(token_seq tokens, const std::string& adapter,
                          logprobs_callback done) {
  if (asked_++ % every_ != 0) {
    inner_.ask(std::move(tokens), adapter, std::move(done));
    return;
  }
  inner_.ask(tokens, adapter,
             [this, tokens, adapter, done = std::move(done)](logprobs_result result) {
               if (const auto* row = std::get_if<at::Tensor>(&result)) {
                 std::lock_guard<std::mutex> lock(mutex_);
                 kept_.push_back({tokens, adapter, *row});
               }
               // Kept before `done`: the workload may finish, and check() run, once done
               // returns.
               done(std::move(result));
             });
}

row_check checking_client::check() const {
  row_check out;
  for (const auto& kept : kept_) {
    ++out.checked;
    const auto diff = difference(
        kept.row.contiguous(),
        rounded(rule_.reference(kept.tokens, kept.adapter), rule_.dtype), rule_);
    if (diff.empty())
      continue;
    if (++out.mismatched == 1)
      out.first_mismatch =
          "row after a " + std::to_string(kept.tokens.size()) + "-token query" +
          (kept.adapter.empty() ? "" : " under " + kept.adapter) + ": " + diff;
  }
  return out;
}

} // namespace canopy::app
