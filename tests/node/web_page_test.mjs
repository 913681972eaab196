// canopy serve's page in a real browser: Debian's chromium driven by playwright-core,
// against a server with stories260K and a bearer token. The page asks for the token
// once; a context's bars are /v1/logprobs' top tokens, exactly; clicking a bar extends
// the context and "Step back" shrinks it; sampling adds one token; two contexts compare
// side by side; a scored text's colours carry /v1/completions' log-probs; the budgets
// fill and the live charts move under load; the cache view opens down to a prefix that
// was asked. Screenshots go to CANOPY_ARTIFACTS. The
// page's files are open, the API is not; --no-web-page serves the API alone.
// Run by ctest (tests/node/CMakeLists.txt); skips (77) without ../shared or chromium
// unless CANOPY_REQUIRE_FIXTURES=1.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { post, requireStories, runTests, serve, skip } from "./canopy_serve.mjs";

requireStories();
const chromiumPath = process.env.CANOPY_CHROMIUM ?? "/usr/bin/chromium";
if (!existsSync(chromiumPath)) skip(`needs chromium at ${chromiumPath} (apt install chromium)`);
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  skip(`playwright-core is not installed (npm ci --prefix tests/node): ${e.message}`);
}
const artifacts = process.env.CANOPY_ARTIFACTS ?? mkdtempSync(join(tmpdir(), "canopy-page-"));
mkdirSync(artifacts, { recursive: true });

const token = "page-test-token-0123456789";
const auth = { Authorization: `Bearer ${token}` };
const dir = mkdtempSync(join(tmpdir(), "canopy-page-token-"));
writeFileSync(join(dir, "token"), `${token}\n`);
const server = await serve("--auth-token-file", join(dir, "token"));
const url = server.url;
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ["--no-sandbox"], // as root in a container, chromium's sandbox cannot start
});
const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
// The browser logs each 401 the page gets before it has the token; anything else counts.
page.on("console", (m) => {
  if (m.type() === "error" && !/status of 401/.test(m.text())) pageErrors.push(m.text());
});

/** The bars a panel shows: [{id, logprob}], largest first. */
const barsOf = (panel) =>
  page.$$eval(`${panel} .bar`, (bars) =>
    bars.map((b) => ({ id: Number(b.dataset.id), logprob: Number(b.dataset.logprob) })),
  );

/** Waits until `panel` shows the bars of `tokens`. */
const shown = (panel, tokens) =>
  page.waitForSelector(`${panel}[data-state="shown"][data-tokens="${tokens.join(",")}"]`);

/** /v1/logprobs' top 20 after `tokens`, as the bars hold them. */
async function topOf(tokens) {
  const answer = await post(url, "/v1/logprobs", { tokens, top_k: 20 }, auth);
  return answer.ids.map((id, i) => ({ id, logprob: answer.logprobs[i] }));
}

const tokenize = async (text) => (await post(url, "/v1/tokenize", { text }, auth)).tokens;

const tests = {
  async the_pages_files_are_open_and_the_api_still_asks_for_the_token() {
    const index = await fetch(url + "/");
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-type"), /^text\/html/);
    assert.match(index.headers.get("content-security-policy"), /default-src 'self'/);
    for (const file of ["/web/page.js", "/web/uPlot.iife.min.js", "/web/page.css"])
      assert.equal((await fetch(url + file)).status, 200, file);
    const missing = await fetch(url + "/web/missing.js");
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, "not_found");
    assert.equal((await fetch(url + "/", { method: "POST", body: "{}" })).status, 401);
    const posted = await fetch(url + "/", { method: "POST", body: "{}", headers: auth });
    assert.equal(posted.status, 405, "the page's files answer GET");
    assert.equal((await fetch(url + "/v1/model")).status, 401);
  },

  async the_page_asks_for_the_token_once_and_names_the_model() {
    await page.goto(url);
    await page.waitForSelector("#token-dialog[open]");
    await page.fill("#token-input", token);
    await page.click("#token-dialog button");
    await page.waitForSelector("body[data-ready=true]");
    assert.match(await page.textContent("#model-name"), /stories260K/);
    assert.equal(await page.$("#token-dialog[open]"), null, "asked once, not per call");
  },

  async a_contexts_bars_are_the_top_tokens_of_v1_logprobs() {
    const tokens = await tokenize("Once upon a time");
    await page.fill("#panel-a .context-input", "Once upon a time");
    await page.press("#panel-a .context-input", "Enter");
    await shown("#panel-a", tokens);
    assert.deepEqual(await barsOf("#panel-a"), await topOf(tokens));
    await page.screenshot({ path: join(artifacts, "playground.png"), fullPage: true });
  },

  async clicking_a_bar_extends_the_context_and_step_back_shrinks_it() {
    const tokens = await tokenize("Once upon a time");
    const third = (await barsOf("#panel-a"))[2];
    await page.click(`#panel-a .bar[data-id="${third.id}"]`);
    const extended = [...tokens, third.id];
    await shown("#panel-a", extended);
    assert.deepEqual(await barsOf("#panel-a"), await topOf(extended));
    assert.equal(await page.$$eval("#panel-a .chip", (c) => c.length), extended.length);
    await page.click("#panel-a .back");
    await shown("#panel-a", tokens);
    assert.deepEqual(await barsOf("#panel-a"), await topOf(tokens));
  },

  async sampling_adds_one_token_from_the_model() {
    const tokens = await tokenize("Once upon a time");
    await page.click("#panel-a .sample");
    await page.waitForFunction(
      (n) => {
        const panel = document.querySelector("#panel-a");
        return panel.dataset.state === "shown" && panel.dataset.tokens.split(",").length === n;
      },
      tokens.length + 1,
    );
    const now = (await page.getAttribute("#panel-a", "data-tokens")).split(",").map(Number);
    assert.deepEqual(now.slice(0, -1), tokens);
    assert.deepEqual(await barsOf("#panel-a"), await topOf(now));
    await page.click("#panel-a .back");
    await shown("#panel-a", tokens);
  },

  async two_contexts_compare_side_by_side() {
    const tokens = await tokenize("Once upon a time");
    await page.check("#compare");
    await shown("#panel-b", tokens); // starts as a copy of the first
    const other = await tokenize("The cat sat");
    await page.fill("#panel-b .context-input", "The cat sat");
    await page.press("#panel-b .context-input", "Enter");
    await shown("#panel-b", other);
    assert.deepEqual(await barsOf("#panel-b"), await topOf(other));
    assert.deepEqual(await barsOf("#panel-a"), await topOf(tokens), "the first is unchanged");
    await page.screenshot({ path: join(artifacts, "compare.png"), fullPage: true });
    await page.uncheck("#compare");
  },

  async a_scored_texts_colours_carry_each_tokens_log_prob() {
    const text = "Once upon a time, there was a little girl named Lily.";
    await page.fill("#scoring-text", text);
    await page.click("#score");
    await page.waitForSelector("#scored[data-state=shown]");
    const id = (await (await fetch(url + "/v1/models", { headers: auth })).json()).data[0].id;
    const expected = (
      await post(url, "/v1/completions",
        { model: id, prompt: text, max_tokens: 0, echo: true, logprobs: 0 }, auth)
    ).choices[0].logprobs;
    const spans = await page.$$eval("#scored .scored-token", (s) =>
      s.map((e) => ({
        text: e.textContent,
        logprob: e.dataset.logprob === undefined ? null : Number(e.dataset.logprob),
        coloured: e.style.background !== "",
      })),
    );
    assert.deepEqual(spans.map((s) => s.text), expected.tokens);
    assert.deepEqual(spans.map((s) => s.logprob), expected.token_logprobs);
    assert.deepEqual(spans.map((s) => s.coloured), expected.token_logprobs.map((l) => l !== null));
  },

  async the_budgets_fill_and_the_charts_move_under_load() {
    await page.click('.tab[data-tab="figures"]');
    // Load until every chart has a few points and its newest is above zero: new
    // sequences (computed) and one repeated in every batch (a cache hit).
    let loading = true;
    const load = (async () => {
      for (let n = 0; loading; ++n) {
        const [a, b] = [2 + (n % 500), 2 + (Math.floor(n / 500) % 500)];
        const batch = Array.from({ length: 15 }, (_, i) => [1, a, b, 2 + i]);
        batch.push([1, 2, 3]);
        await post(url, "/v1/logprobs", { batch, top_k: 1 }, auth);
      }
    })();
    try {
      await page.waitForFunction(
        () =>
          ["queries", "hit_rate", "tokens", "batch", "latency"].every((chart) => {
            const box = document.querySelector(`[data-chart="${chart}"]`);
            return Number(box.dataset.points) >= 4 && Number(box.dataset.latest) > 0;
          }),
        null,
        { timeout: 15000 },
      );
    } catch (e) {
      const seen = await page.$$eval(".chart", (boxes) =>
        boxes.map((b) => `${b.dataset.chart}: ${b.dataset.points} points, ${b.dataset.latest}`),
      );
      throw new Error(`${e.message}; the charts: ${seen.join("; ")}`);
    } finally {
      loading = false;
      await load;
    }
    await page.screenshot({ path: join(artifacts, "figures.png"), fullPage: true });
    await page.click('.tab[data-tab="cache"]');
    const rows = await page.waitForSelector('[data-budget="log-prob rows"]');
    assert.ok(Number(await rows.getAttribute("data-used")) > 0);
    assert.ok(Number(await rows.getAttribute("data-limit")) > 0);
    assert.ok(await page.$('[data-budget^="KV, worker 0"]'), "each worker's KV");
  },

  async the_cache_view_opens_down_to_a_prefix_that_was_asked() {
    const tokens = await tokenize("Once upon a time");
    await page.click('.tab[data-tab="cache"]');
    for (let n = 1; n < tokens.length; ++n) {
      const prefix = tokens.slice(0, n).join(",");
      await page.click(`.trie-node[data-prefix="${prefix}"] > .toggle`);
      await page.waitForSelector(`.trie-node[data-prefix="${tokens.slice(0, n + 1).join(",")}"]`);
    }
    const leaf = `.trie-node[data-prefix="${tokens.join(",")}"]`;
    assert.ok(Number(await page.getAttribute(leaf, "data-row-bytes")) > 0, "its row");
    assert.ok(Number(await page.getAttribute(leaf, "data-kv")) > 0, "its KV");
    assert.ok(Number(await page.getAttribute(leaf, "data-hits")) > 0);
    await page.screenshot({ path: join(artifacts, "cache.png"), fullPage: true });
  },

  async the_page_raised_no_error() {
    assert.deepEqual(pageErrors, []);
  },
};

let failed = await runTests(tests, {});
await browser.close();
assert.equal(await server.stop(), 0, "canopy serve exits 0 on SIGTERM");

// --no-web-page: the API alone, "/" is an unknown path.
const bare = await serve("--no-web-page");
failed += await runTests({
  async no_web_page_serves_the_api_alone() {
    const index = await fetch(bare.url + "/");
    assert.equal(index.status, 404);
    assert.equal((await index.json()).error.code, "not_found");
    assert.equal((await fetch(bare.url + "/healthz")).status, 200);
  },
}, {});
await bare.stop();
rmSync(dir, { recursive: true, force: true });
console.log(`screenshots in ${artifacts}`);
process.exit(failed ? 1 : 0);
