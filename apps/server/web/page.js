// canopy serve's page: the playground (next-token distributions, contexts compared,
// text scored), the cache's budgets and the engine's live figures. Everything it shows
// comes from the API the server already serves, with the caller's token.

import { get } from "./api.js";
import { renderBudgets } from "./cache_view.js";
import { Figures } from "./figures.js";
import { readMetrics } from "./metrics.js";
import { ContextPanel } from "./playground.js";
import { TrieView } from "./trie_view.js";
import { setUpScoring } from "./scoring.js";
import { loadVocab } from "./vocab.js";

const errorLine = document.getElementById("page-error");

function showError(message) {
  errorLine.textContent = message;
  errorLine.hidden = false;
}

function setUpTabs(onShow) {
  const tabs = [...document.querySelectorAll(".tab")];
  for (const tab of tabs)
    tab.addEventListener("click", () => {
      for (const other of tabs) {
        const selected = other === tab;
        other.setAttribute("aria-selected", String(selected));
        document.getElementById(other.dataset.tab).hidden = !selected;
      }
      onShow(tab.dataset.tab);
    });
}

/** Reads /metrics every second and hands each change to the views. */
function pollMetrics(views) {
  let before = null;
  const tick = async () => {
    try {
      const after = await readMetrics();
      for (const view of views) view(before, after);
      before = after;
    } catch (e) {
      showError(e.message);
    }
    setTimeout(tick, 1000);
  };
  tick();
}

async function main() {
  const model = await get("/v1/model");
  const served = (await get("/v1/models")).data[0].id;
  document.getElementById("model-name").textContent =
    `${model.name}: vocabulary ${model.vocab_size}, context ${model.context_length}` +
    (model.tokenizer ? "" : ", no tokenizer (give token ids)");
  await loadVocab(model.tokenizer);

  const settings = () => ({
    topK: Math.max(1, Math.min(200, Number(document.getElementById("top-k").value) || 20)),
    temperature: Math.max(0, Number(document.getElementById("temperature").value) || 0),
  });
  const a = new ContextPanel(document.getElementById("panel-a"), model, settings, showError);
  const bRoot = document.getElementById("panel-b");
  const b = new ContextPanel(bRoot, model, settings, showError);
  document.getElementById("compare").addEventListener("change", (event) => {
    bRoot.hidden = !event.target.checked;
    if (event.target.checked) b.guard(() => b.setTokens([...a.tokens]));
  });
  setUpScoring(model, served, showError);

  const figures = new Figures(document.getElementById("charts"));
  const budgets = document.getElementById("budgets");
  const trie = new TrieView(document.getElementById("trie"));
  let showing = "playground";
  setUpTabs((tab) => {
    showing = tab;
    if (tab === "cache") trie.refresh().catch((e) => showError(e.message));
  });
  // The trie is walked on the server for each refresh, so only while it is shown.
  setInterval(() => {
    if (showing === "cache") trie.refresh().catch((e) => showError(e.message));
  }, 2000);
  pollMetrics([
    (before, after) => renderBudgets(budgets, after.samples),
    (before, after) => before && figures.update(before, after),
  ]);
  document.body.dataset.ready = "true";
}

main().catch((e) => showError(e.message));
