#include "cpu_attention.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace canopy::backends {

void cpu_attention_group(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                         const attention_group& g, at::Tensor& out) {
  const auto H = q.size(1), hd = q.size(2), KV = keys.size(1);
  const auto per_kv = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const float* qd = q.data_ptr<float>();
  const float* kd = keys.data_ptr<float>();
  const float* vd = values.data_ptr<float>();
  float* od = out.data_ptr<float>();
  const auto n = g.queries, L = g.keys;
  at::parallel_for(0, g.items * n, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scores(static_cast<std::size_t>(L));
    std::vector<double> acc(static_cast<std::size_t>(hd));
    for (std::int64_t r = begin; r < end; ++r) {
      const auto start = g.key_start[static_cast<std::size_t>(r)];
      const auto limit = g.key_limit[static_cast<std::size_t>(r)];
      if (limit == 0)
        continue; // a padded query
      const auto row = g.query_index[static_cast<std::size_t>(r)];
      const std::int64_t* key_rows = g.key_index.data() + (r / n) * L;
      for (std::int64_t h = 0; h < H; ++h) {
        const auto kv_head = h / per_kv;
        const float* qv = qd + (row * H + h) * hd;
        float top = -INFINITY;
        for (std::int64_t l = start; l < limit; ++l) {
          const float* kv = kd + (key_rows[l] * KV + kv_head) * hd;
          float dot = 0;
          for (std::int64_t d = 0; d < hd; ++d)
            dot += qv[d] * kv[d];
          scores[static_cast<std::size_t>(l)] = dot * scale;
          top = std::max(top, dot * scale);
        }
        // The sums run over every key, so they accumulate in double; the exponent
        // itself is float (its argument is <= 0, its result in (0, 1]).
        double total = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t l = start; l < limit; ++l) {
          const double p = std::exp(scores[static_cast<std::size_t>(l)] - top);
          total += p;
          const float* vv = vd + (key_rows[l] * KV + kv_head) * hd;
          for (std::int64_t d = 0; d < hd; ++d)
            acc[static_cast<std::size_t>(d)] += p * vv[d];
        }
        float* o = od + (row * H + h) * hd;
        for (std::int64_t d = 0; d < hd; ++d)
          o[d] = static_cast<float>(acc[static_cast<std::size_t>(d)] / total);
      }
    }
  });
}

} // namespace canopy::backends
