#include <canopy/server/api/next_byte_encoding.hpp>

#include <canopy/backends/tokenizers/hex_bytes.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace canopy::server {

namespace {

using json = nlohmann::json;

json log_value(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json encode_one(const next_byte_item& item, const backends::next_byte_distribution& d) {
  json logprobs = json::array();
  for (const double x : d.logprobs)
    logprobs.push_back(log_value(x));
  return {{"tokens", item.tokens},
          {"prefix", backends::hex_bytes(item.prefix)},
          {"logprobs", std::move(logprobs)},
          {"end_of_token", log_value(d.end_of_token)},
          {"eos", d.eos ? log_value(*d.eos) : json(nullptr)},
          {"log_mass", log_value(d.log_mass)}};
}

// The longest texts: a double ("-2.2250738585072014e-308", 24 characters), an int32
// ("-2147483648", 11), each with its separator.
constexpr std::size_t number_bytes = 25;
constexpr std::size_t token_bytes = 12;
// Field names, brackets and quotes of one item and of the batch around them.
constexpr std::size_t item_overhead = 128;

} // namespace

std::string
encode_next_byte_json(const std::vector<next_byte_item>& items,
                      const std::vector<backends::next_byte_distribution>& answers,
                      bool batch) {
  if (items.size() != answers.size() || (!batch && items.size() != 1))
    throw std::invalid_argument("encode_next_byte_json: " + std::to_string(items.size()) +
                                " items, " + std::to_string(answers.size()) + " answers" +
                                (batch ? "" : ", not a batch"));
  if (!batch)
    return encode_one(items[0], answers[0]).dump();
  json results = json::array();
  for (std::size_t i = 0; i < items.size(); ++i)
    results.push_back(encode_one(items[i], answers[i]));
  return json{{"results", std::move(results)}}.dump();
}

std::size_t next_byte_json_bound(const std::vector<next_byte_item>& items) {
  std::size_t bound = item_overhead;
  for (const auto& item : items)
    bound += item_overhead + (256 + 3) * number_bytes + item.tokens.size() * token_bytes +
             2 * item.prefix.size();
  return bound;
}

} // namespace canopy::server
