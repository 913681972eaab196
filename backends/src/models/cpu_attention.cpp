#include "models/cpu_attention.hpp"

#include "models/vector_math.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace canopy::backends {

namespace {

// Note [attention loops]
// A decoding pass on stories260K spent 45 of its 62 us here when these loops were
// scalar and summed in double (5 layers x 8 heads x ~140 keys: ~7 ns a key and head).
// What it took to make them SIMD and keep them busy:
//  - the common head sizes get loops compiled for their size (hd known only at run
//    time cost each 8-float product a loop's setup);
//  - sums run in independent float lanes (dot products, the softmax total, the
//    weighted values), as ATen's BLAS formulation sums in float: a single running sum
//    is a chain of dependent adds, and strict float arithmetic may not reorder it
//    (ragged_attention_test holds both kernels to 2e-5 of a float64 reference);
//  - exp_nonpositive instead of a libm call per score;
//  - scores eight keys at a time where the head size is a known multiple of eight:
//    each key's eight-lane product, then one transposing tree of pairwise sums for all
//    eight (as hadd does), where a key alone was summed across in scalar adds (the
//    AVX2 clone's scores on stories260K were scalar code);
//  - the query heads that share a KV head read each key and value once.

/// q . k over hd. Strict float arithmetic keeps a single running sum scalar (each add
/// waits for the last); eight partial sums are one SIMD register's worth of independent
/// adds.
template <std::int64_t HD>
inline float dot(const float* q, const float* k, std::int64_t hd_at_run_time) {
  const auto hd = HD ? HD : hd_at_run_time;
  float part[lanes] = {};
  std::int64_t d = 0;
  for (; d + lanes <= hd; d += lanes)
    for (std::int64_t i = 0; i < lanes; ++i)
      part[i] += q[d + i] * k[d + i];
  // The lanes are added as a tree (their order is this kernel's own rounding, as
  // BLAS's is its own), not one after another.
  float sum = ((part[0] + part[4]) + (part[1] + part[5])) +
              ((part[2] + part[6]) + (part[3] + part[7]));
  if constexpr (HD % lanes != 0 || HD == 0) // a whole number of lanes has no tail
    for (; d < hd; ++d)
      sum += q[d] * k[d];
  return sum;
}

// Eight floats as one value (GCC's vector extension): 256-bit registers in the AVX2
// clone, two 128-bit ones in the baseline. The helpers below are always inlined into
// attend_row's clones, each compiling them for its own target (so the build drops
// -Wpsabi's note on how an AVX call would pass them: no such call happens).
using float8 = float __attribute__((vector_size(32)));
using lane_indices = int __attribute__((vector_size(32)));

[[gnu::always_inline]] inline float8 load8(const float* p) {
  float8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

/// Sums of adjacent pairs within each 128-bit half (AVX's hadd): a0+a1, a2+a3, b0+b1,
/// b2+b3, then a4+a5, a6+a7, b4+b5, b6+b7.
[[gnu::always_inline]] inline float8 pair_sums(float8 a, float8 b) {
  return __builtin_shuffle(a, b, lane_indices{0, 2, 8, 10, 4, 6, 12, 14}) +
         __builtin_shuffle(a, b, lane_indices{1, 3, 9, 11, 5, 7, 13, 15});
}

/// Lane m: the sum of v[m]'s eight lanes.
[[gnu::always_inline]] inline float8 sums_of_eight(const float8 (&v)[lanes]) {
  // a: v0..v3's sums of lanes 0-3, then of lanes 4-7; b the same for v4..v7.
  const float8 a = pair_sums(pair_sums(v[0], v[1]), pair_sums(v[2], v[3]));
  const float8 b = pair_sums(pair_sums(v[4], v[5]), pair_sums(v[6], v[7]));
  return __builtin_shuffle(a, b, lane_indices{0, 1, 2, 3, 8, 9, 10, 11}) +
         __builtin_shuffle(a, b, lane_indices{4, 5, 6, 7, 12, 13, 14, 15});
}

/// scores[m] = q . k_m * scale for the eight keys k_m = keys + offsets[m], HD a known
/// multiple of eight. Eight keys at once, so that their eight-lane products are summed
/// across by one transposing tree (Note [attention loops]).
template <std::int64_t HD>
[[gnu::always_inline]] inline void eight_scores(const float* q, const float* keys,
                                                const std::int64_t* offsets, float scale,
                                                float* scores) {
  float8 products[lanes];
  for (std::int64_t m = 0; m < lanes; ++m) {
    const float* k = keys + offsets[m];
    float8 sum = load8(q) * load8(k);
    for (std::int64_t d = lanes; d < HD; d += lanes)
      sum += load8(q + d) * load8(k + d);
    products[m] = sum;
  }
  const float8 result = sums_of_eight(products) * scale;
  __builtin_memcpy(scores, &result, sizeof result);
}

// Weighted values accumulate in this many independent sets of hd sums, for the same
// reason.
constexpr std::int64_t value_sets = 4;

/// One query row against its keys, for the `per_kv` query heads of KV head `kv_head`.
/// HD, PER_KV: the head size and query heads per KV head when known at compile time,
/// else 0 and the run-time arguments (a decoding pass on stories260K, timed in a
/// harness around cpu_attention_group: 41 us of attention with only HD known, 30 with
/// both). Compiled for AVX2 and for the
/// baseline, the CPU picking at load (target_clones): 8-wide lanes made it 24 us. AVX2
/// is the clone AVX-512 machines run too, so the suite tests the code they all run
/// (an AVX-512 clone gained 1.5 us more).
/// scores: scratch [per_kv * keys]; acc_scratch: [value_sets * hd], used only when HD
/// is 0 (a known size accumulates in a local array, which the compiler can keep in
/// registers: through a pointer that might alias the values, every add was a store
/// and a reload).
template <std::int64_t HD, std::int64_t PER_KV>
__attribute__((target_clones("avx2", "default"))) void
attend_row(const float* q, const float* keys, const float* values,
           const std::int64_t* key_rows, std::int64_t start, std::int64_t limit,
           std::int64_t KV, std::int64_t kv_head, std::int64_t per_kv_at_run_time,
           std::int64_t hd_at_run_time, float scale, float* scores, float* acc_scratch,
           float* out) {
  const auto hd = HD ? HD : hd_at_run_time;
  const auto per_kv = PER_KV ? PER_KV : per_kv_at_run_time;
  float local[HD ? value_sets * HD : 1];
  float* acc = HD ? local : acc_scratch;
  const auto n = limit - start;
  const std::int64_t* rows = key_rows + start;
  std::int64_t scored = 0;
  if constexpr (HD != 0 && HD % lanes == 0)
    for (; scored + lanes <= n; scored += lanes) {
      std::int64_t offsets[lanes];
      for (std::int64_t m = 0; m < lanes; ++m)
        offsets[m] = (rows[scored + m] * KV + kv_head) * hd;
      for (std::int64_t j = 0; j < per_kv; ++j)
        eight_scores<HD>(q + j * hd, keys, offsets, scale, scores + j * n + scored);
    }
  for (; scored < n; ++scored) {
    const float* k = keys + (rows[scored] * KV + kv_head) * hd;
    for (std::int64_t j = 0; j < per_kv; ++j)
      scores[j * n + scored] = dot<HD>(q + j * hd, k, hd) * scale;
  }
  for (std::int64_t j = 0; j < per_kv; ++j) {
    float* s = scores + j * n;
    const float top = lane_max(s, n);
    for (std::int64_t l = 0; l < n; ++l)
      s[l] = exp_nonpositive(s[l] - top);
    const auto inverse = static_cast<float>(1.0 / lane_sum(s, n));
    std::fill(acc, acc + value_sets * hd, 0.0f);
    std::int64_t l = 0;
    for (; l + value_sets <= n; l += value_sets)
      for (std::int64_t set = 0; set < value_sets; ++set) {
        const float* v = values + (rows[l + set] * KV + kv_head) * hd;
        const float p = s[l + set];
        float* a = acc + set * hd;
        for (std::int64_t d = 0; d < hd; ++d)
          a[d] += p * v[d];
      }
    for (; l < n; ++l) {
      const float* v = values + (rows[l] * KV + kv_head) * hd;
      for (std::int64_t d = 0; d < hd; ++d)
        acc[d] += s[l] * v[d];
    }
    float* o = out + j * hd;
    for (std::int64_t d = 0; d < hd; ++d) {
      float sum = 0;
      for (std::int64_t set = 0; set < value_sets; ++set)
        sum += acc[set * hd + d];
      o[d] = sum * inverse;
    }
  }
}

using attend_row_fn = decltype(&attend_row<0, 0>);

template <std::int64_t HD> attend_row_fn attend_row_for_heads(std::int64_t per_kv) {
  switch (per_kv) {
  case 1:
    return attend_row<HD, 1>;
  case 2:
    return attend_row<HD, 2>;
  case 4:
    return attend_row<HD, 4>;
  case 8:
    return attend_row<HD, 8>;
  default:
    return attend_row<HD, 0>;
  }
}

attend_row_fn attend_row_for(std::int64_t hd, std::int64_t per_kv) {
  switch (hd) {
  case 8:
    return attend_row_for_heads<8>(per_kv);
  case 16:
    return attend_row_for_heads<16>(per_kv);
  case 32:
    return attend_row_for_heads<32>(per_kv);
  case 64:
    return attend_row_for_heads<64>(per_kv);
  case 128:
    return attend_row_for_heads<128>(per_kv);
  default:
    return attend_row_for_heads<0>(per_kv);
  }
}

} // namespace

void cpu_attention_group(const at::Tensor& q, const kv_rows& source,
                         const attention_group& g, at::Tensor& out) {
  const auto H = q.size(1), hd = q.size(2), KV = source.keys.elements.size(1);
  const auto per_kv = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const float* qd = q.data_ptr<float>();
  const float* kd = source.in_place(true);
  const float* vd = source.in_place(false);
  const bool in_place = kd && vd;
  float* od = out.data_ptr<float>();
  const auto n = g.queries, L = g.keys;
  const auto attend = attend_row_for(hd, per_kv);
  // Keys converted from another format lie in order in the scratch: row l is l.
  std::vector<std::int64_t> in_order(in_place ? 0 : static_cast<std::size_t>(L));
  for (std::int64_t l = 0; l < static_cast<std::int64_t>(in_order.size()); ++l)
    in_order[static_cast<std::size_t>(l)] = l;
  at::parallel_for(0, g.items * n, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scores(static_cast<std::size_t>(per_kv * L));
    std::vector<float> acc(static_cast<std::size_t>(value_sets * hd));
    std::vector<float> k_float(in_place ? 0 : static_cast<std::size_t>(L * hd));
    std::vector<float> v_float(k_float.size());
    for (std::int64_t r = begin; r < end; ++r) {
      const auto start = g.key_start[static_cast<std::size_t>(r)];
      const auto limit = g.key_limit[static_cast<std::size_t>(r)];
      if (limit == 0)
        continue; // a padded query
      const auto row = g.query_index[static_cast<std::size_t>(r)];
      const std::int64_t* key_rows = g.key_index.data() + (r / n) * L;
      // Query heads kv_head * per_kv .. + per_kv - 1 read KV head kv_head (HF's
      // repeat_kv), and lie next to each other in the row.
      for (std::int64_t kv_head = 0; kv_head < KV; ++kv_head) {
        const auto first = (row * H + kv_head * per_kv) * hd;
        if (in_place) {
          attend(qd + first, kd, vd, key_rows, start, limit, KV, kv_head, per_kv, hd,
                 scale, scores.data(), acc.data(), od + first);
          continue;
        }
        const auto seen = limit - start;
        source.read_head(true, key_rows + start, seen, kv_head, k_float.data());
        source.read_head(false, key_rows + start, seen, kv_head, v_float.data());
        attend(qd + first, k_float.data(), v_float.data(), in_order.data(), 0, seen, 1, 0,
               per_kv, hd, scale, scores.data(), acc.data(), od + first);
      }
    }
  });
}

} // namespace canopy::backends
