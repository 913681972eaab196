#pragma once
// A torch_backend pass whose device work is queued (backend_i::start): its answer but
// the rows, which are on their way to the host, and the KV slots it keeps, which go
// back to the free list unless it finishes.
// Thread contract: the worker's thread, as its backend.

#include <canopy/backends/backend.hpp>

#include "kv/slot_reservation.hpp"
#include "models/rows_to_host.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace canopy::backends {

class started_torch_pass final : public started_pass {
public:
  /// `answer` holds everything but the items' log-probs and the time: `rows_per_item[i]`
  /// rows of `vocab` values each, item after item, in `rows`. The pass's compute_ns is
  /// the time from `started` (when start began) to now, and finish()'s own.
  started_torch_pass(pass_result answer, std::vector<std::size_t> rows_per_item,
                     std::size_t vocab, rows_to_host rows,
                     std::unique_ptr<slot_reservation> kept, pass_profile* profile,
                     std::chrono::steady_clock::time_point started);

  bool ready() const override { return rows_.arrived(); }
  pass_result finish() override;

private:
  pass_result answer_;
  std::vector<std::size_t> rows_per_item_;
  std::size_t vocab_;
  rows_to_host rows_;
  std::unique_ptr<slot_reservation> kept_;
  pass_profile* profile_;
};

} // namespace canopy::backends
