#include <canopy/messages/computed_pass.hpp>

#include <stdexcept>
#include <utility>

namespace canopy::messages {

std::vector<shared_logprobs> take_rows(computed_item& item, const computed_pass& pass) {
  if (!item.rows.empty() || item.values.empty())
    return std::move(item.rows);
  const auto vocab = static_cast<std::size_t>(pass.vocab);
  if (vocab == 0 || item.values.size() % vocab != 0)
    throw std::invalid_argument("computed pass: " + std::to_string(item.values.size()) +
                                " values are not rows of " + std::to_string(vocab));
  // Copied rather than adopted: the values' memory goes back to the worker's thread,
  // which reuses it for the next pass, while the rows are made on this thread. A
  // worker adopting them as rows had to fault fresh pages in for every pass, in the
  // critical path (cache misses at zero cost ran ~17% slower).
  std::vector<shared_logprobs> rows;
  const auto count = item.values.size() / vocab;
  rows.reserve(count);
  for (std::size_t r = 0; r < count; ++r)
    rows.push_back(
        {cache::logprob_row::encode(item.values.data() + r * vocab, vocab, pass.dtype)});
  item.values.clear();
  return rows;
}

} // namespace canopy::messages
