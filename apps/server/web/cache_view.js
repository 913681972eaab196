// The cache's budgets and how full they are, from /metrics: the log-prob rows, each
// worker's KV (and its host tier when it has one), and the HTTP side's budgets; with
// the cache's hits against the queries asked.

import { total } from "./metrics.js";

/** A byte count as people read it: "140.0 KiB". */
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    ++i;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function meterRow(name, used, limit, detail, format = bytes) {
  const row = document.createElement("div");
  row.className = "budget";
  row.dataset.budget = name;
  row.dataset.used = used;
  row.dataset.limit = limit;
  const label = document.createElement("span");
  label.className = "budget-name";
  label.textContent = name;
  const meter = document.createElement("meter");
  meter.min = 0;
  meter.max = limit > 0 ? limit : 1;
  meter.value = used;
  const text = document.createElement("span");
  text.className = "budget-text";
  text.textContent = `${format(used)} of ${format(limit)}${detail ? `; ${detail}` : ""}`;
  row.append(label, meter, text);
  return row;
}

const workerOf = (labels) => `worker ${labels.worker} (${labels.node}, ${labels.device})`;

export function renderBudgets(root, samples) {
  const rows = [];
  const hits = total(samples, "canopy_cache_hits_total");
  const queries = total(samples, "canopy_queries_total");
  rows.push(
    meterRow(
      "log-prob rows",
      total(samples, "canopy_logprob_cache_bytes"),
      total(samples, "canopy_logprob_cache_budget_bytes"),
      `${total(samples, "canopy_logprob_cache_entries")} rows; ${hits} hits of ${queries} queries`,
    ),
  );
  for (const [family, tier] of [
    ["canopy_kv_cache", "KV"],
    ["canopy_kv_host_cache", "KV host tier"],
  ]) {
    for (const s of samples.get(`${family}_bytes`) ?? []) {
      const same = (l) => l.worker === s.labels.worker && l.node === s.labels.node;
      const budget = total(samples, `${family}_budget_bytes`, same);
      if (tier !== "KV" && budget === 0) continue; // no host tier
      const peak = total(samples, `${family}_peak_bytes`, same);
      rows.push(
        meterRow(
          `${tier}, ${workerOf(s.labels)}`,
          s.value,
          budget,
          peak ? `peak ${bytes(peak)}` : "",
        ),
      );
    }
  }
  const limits = samples.get("canopy_http_budget_limit") ?? [];
  for (const s of samples.get("canopy_http_budget_used") ?? []) {
    const limit = limits.find((l) => l.labels.budget === s.labels.budget)?.value ?? 0;
    const format = s.labels.unit === "bytes" ? bytes : (n) => `${n} ${s.labels.unit}`;
    rows.push(meterRow(`HTTP ${s.labels.budget}`, s.value, limit, "", format));
  }
  root.replaceChildren(...rows);
}
