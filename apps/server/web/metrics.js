// The server's /metrics (Prometheus text) read into numbers, and what changed between
// two readings: rates of the counters, and the quantiles of the histograms' new
// observations, interpolated within buckets as Prometheus' histogram_quantile does.

import { get } from "./api.js";

/** Samples by name: [{labels: {...}, value}], from the text format. */
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const [, key, value] of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
      labels[key] = value;
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of a family's samples (0 when absent), optionally those matching `where`. */
export function total(samples, name, where = () => true) {
  return (samples.get(name) ?? [])
    .filter((s) => where(s.labels))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Cumulative buckets [[le, count]] of a histogram, in increasing le. */
function buckets(samples, name) {
  return (samples.get(`${name}_bucket`) ?? [])
    .map((s) => [s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), s.value])
    .sort((a, b) => a[0] - b[0]);
}

/** Quantile q of the observations between two readings' buckets (null: none). */
export function quantileBetween(before, after, name, q) {
  const was = new Map(buckets(before, name));
  const now = buckets(after, name).map(([le, count]) => [le, count - (was.get(le) ?? 0)]);
  const count = now.length ? now[now.length - 1][1] : 0;
  if (count <= 0) return null;
  const rank = q * count;
  let lower = 0;
  let below = 0;
  for (const [le, cumulative] of now) {
    if (cumulative >= rank) {
      if (le === Infinity) return lower; // the highest finite bound, as Prometheus
      const inBucket = cumulative - below;
      return inBucket > 0 ? lower + ((le - lower) * (rank - below)) / inBucket : le;
    }
    lower = le;
    below = cumulative;
  }
  return lower;
}

export async function readMetrics() {
  return { at: performance.now() / 1000, samples: parseMetrics(await get("/metrics")) };
}
