// Live charts of the engine's figures, one point per reading of /metrics: queries/s,
// the cache's hit rate, tokens computed/s, the mean batch size and latency quantiles.
// uPlot (a small canvas time-series library, embedded at build time) draws them.

import { quantileBetween, total } from "./metrics.js";

const kept = 120; // points per chart: two minutes at one reading a second

const charts = [
  {
    key: "queries",
    title: "Queries/s",
    series: ["queries/s"],
    values: (d) => [d.rate("canopy_queries_total")],
  },
  {
    key: "hit_rate",
    title: "Cache hit rate, %",
    series: ["hit rate"],
    values: (d) => {
      const queries = d.delta("canopy_queries_total");
      return [queries > 0 ? (100 * d.delta("canopy_cache_hits_total")) / queries : null];
    },
  },
  {
    key: "tokens",
    title: "Tokens computed/s",
    series: ["tokens/s"],
    values: (d) => [d.rate("canopy_tokens_computed_total")],
  },
  {
    key: "batch",
    title: "Mean batch size (queries per pass)",
    series: ["batch"],
    values: (d) => {
      const passes = d.delta("canopy_batch_size_count");
      return [passes > 0 ? d.delta("canopy_batch_size_sum") / passes : null];
    },
  },
  {
    key: "latency",
    title: "Query latency, ms",
    series: ["p50", "p99"],
    values: (d) =>
      [0.5, 0.99].map((q) => {
        const s = quantileBetween(d.before, d.after, "canopy_query_latency_seconds", q);
        return s === null ? null : 1000 * s;
      }),
  },
];

const colours = ["#2a7ab0", "#c0504d"];

export class Figures {
  constructor(root) {
    this.time = [];
    this.plots = charts.map((chart) => {
      const box = document.createElement("figure");
      box.className = "chart";
      box.dataset.chart = chart.key;
      const caption = document.createElement("figcaption");
      caption.textContent = chart.title;
      const latest = document.createElement("span");
      latest.className = "latest";
      caption.append(" ", latest);
      box.append(caption);
      root.append(box);
      const plot = new uPlot(
        {
          width: 460,
          height: 170,
          legend: { show: chart.series.length > 1 },
          axes: [{}, { size: 60 }], // room for "10,000" beside the y axis
          scales: {
            // The last two minutes, however few points there are yet.
            x: { time: true, range: (u, min, max) => [max - kept, max + 1] },
            y: { range: (u, min, max) => [0, Math.max(1, max)] },
          },
          series: [
            {},
            ...chart.series.map((label, i) => ({ label, stroke: colours[i], width: 2 })),
          ],
        },
        [[], ...chart.series.map(() => [])],
        box,
      );
      return { chart, plot, box, latest, data: chart.series.map(() => []) };
    });
  }

  /** Adds the point of the change between two readings of /metrics. */
  update(before, after) {
    const seconds = after.at - before.at;
    const delta = (name) => total(after.samples, name) - total(before.samples, name);
    const d = {
      before: before.samples,
      after: after.samples,
      delta,
      rate: (name) => (seconds > 0 ? delta(name) / seconds : null),
    };
    this.time.push(Date.now() / 1000);
    if (this.time.length > kept) this.time.shift();
    for (const p of this.plots) {
      const values = p.chart.values(d);
      values.forEach((v, i) => {
        p.data[i].push(v);
        if (p.data[i].length > kept) p.data[i].shift();
      });
      p.plot.setData([this.time, ...p.data]);
      const shown = values[values.length - 1];
      // The newest value, for people and for the page's tests.
      p.box.dataset.latest = shown ?? "";
      p.box.dataset.points = this.time.length;
      p.latest.textContent = shown === null ? "(none)" : `now ${shown.toFixed(1)}`;
    }
  }
}
