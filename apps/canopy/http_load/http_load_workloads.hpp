#pragma once
// The sequences the load generator asks for. hits: a fixed set, each asked for once to
// warm the server's cache, then drawn at random; misses: every request a fresh random
// sequence, so that none is ever cached (the caller makes sequences long enough that a
// repeat is out of reach).
// Thread contract: a hit_set is immutable once made; share it. A request_source
// belongs to one connection, except warm sources, which share a cursor and so must
// all be used on one thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace canopy::app {

using token_ids = std::vector<std::int32_t>;

/// `count` sequences of `length` tokens in [0, vocab), the same for the same seed.
std::vector<token_ids> make_hit_set(std::size_t count, std::size_t length,
                                    std::size_t vocab, std::uint64_t seed);

/// The requests of one connection.
class request_source {
public:
  virtual ~request_source() = default;
  /// The tokens of the next request, valid until the next call; nullptr: no more.
  virtual const token_ids* next() = 0;
};

/// Each sequence of `set` once across every source sharing `cursor` (start it at 0).
std::unique_ptr<request_source> warm_source(const std::vector<token_ids>& set,
                                            std::size_t& cursor);
/// Sequences of `set` drawn uniformly, forever, from a stream of `seed`.
std::unique_ptr<request_source> hit_source(const std::vector<token_ids>& set,
                                           std::uint64_t seed);
/// A fresh sequence of `length` tokens in [0, vocab) per request, forever, from a
/// stream seeded by the operating system: runs of this process or of earlier ones
/// never ask for the same sequences.
std::unique_ptr<request_source> miss_source(std::size_t length, std::size_t vocab);

/// The least sequence length at which random sequences over `vocab` tokens carry 64
/// bits, so that no two of a benchmark's requests are ever equal; 0 when no length
/// does (vocab 1).
std::size_t least_miss_length(std::size_t vocab);

} // namespace canopy::app
