#include "http_load/http_load_workloads.hpp"

#include <cmath>
#include <random>

namespace canopy::app {

namespace {

void fill_random(token_ids& out, std::size_t length, std::size_t vocab,
                 std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(vocab - 1));
  out.resize(length);
  for (auto& t : out)
    t = id(rng);
}

class warm final : public request_source {
public:
  warm(const std::vector<token_ids>& set, std::size_t& cursor)
      : set_(set), cursor_(cursor) {}
  const token_ids* next() override {
    return cursor_ < set_.size() ? &set_[cursor_++] : nullptr;
  }

private:
  const std::vector<token_ids>& set_;
  std::size_t& cursor_;
};

class hits final : public request_source {
public:
  hits(const std::vector<token_ids>& set, std::uint64_t seed)
      : set_(set), rng_(seed), pick_(0, set.size() - 1) {}
  const token_ids* next() override { return &set_[pick_(rng_)]; }

private:
  const std::vector<token_ids>& set_;
  std::mt19937_64 rng_;
  std::uniform_int_distribution<std::size_t> pick_;
};

class misses final : public request_source {
public:
  misses(std::size_t length, std::size_t vocab) : length_(length), vocab_(vocab) {
    // 128 bits from the OS: a 32-bit seed would let two of thousands of streams
    // coincide now and then, and a coincidence is a cache hit.
    std::random_device os;
    std::seed_seq seed{os(), os(), os(), os()};
    rng_.seed(seed);
  }
  const token_ids* next() override {
    fill_random(tokens_, length_, vocab_, rng_);
    return &tokens_;
  }

private:
  std::size_t length_, vocab_;
  std::mt19937_64 rng_;
  token_ids tokens_; // reused: a request allocates nothing
};

} // namespace

std::vector<token_ids> make_hit_set(std::size_t count, std::size_t length,
                                    std::size_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<token_ids> set(count);
  for (auto& s : set)
    fill_random(s, length, vocab, rng);
  return set;
}

std::unique_ptr<request_source> warm_source(const std::vector<token_ids>& set,
                                            std::size_t& cursor) {
  return std::make_unique<warm>(set, cursor);
}

std::unique_ptr<request_source> hit_source(const std::vector<token_ids>& set,
                                           std::uint64_t seed) {
  return std::make_unique<hits>(set, seed);
}

std::unique_ptr<request_source> miss_source(std::size_t length, std::size_t vocab) {
  return std::make_unique<misses>(length, vocab);
}

std::size_t least_miss_length(std::size_t vocab) {
  return vocab < 2 ? 0
                   : static_cast<std::size_t>(std::ceil(64.0 / std::log2(double(vocab))));
}

} // namespace canopy::app
