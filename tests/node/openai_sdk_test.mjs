// The official OpenAI Node SDK against a real `canopy serve` with stories260K:
// /v1/models, scoring with echo (equal to /v1/logprobs' rows), greedy generation
// (equal to `canopy sample`), streaming (the same tokens), OpenAI-shaped errors, and
// bearer auth. Run by ctest (tests/node/CMakeLists.txt) with CANOPY_CLI and
// CANOPY_SHARED_DIR; skips (exit 77) without ../shared unless CANOPY_REQUIRE_FIXTURES=1.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { cli, post, requireStories, runTests, serve, skip, stories as model } from "./canopy_serve.mjs";

requireStories();
// The SDK is installed by scripts/install-deps.sh (npm ci in tests/node).
let OpenAI;
try {
  OpenAI = (await import("openai")).default;
} catch (e) {
  skip(`the OpenAI SDK is not installed (npm ci --prefix tests/node): ${e.message}`);
}
const id = "stories260K.bin";
const text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";

async function tokensComputed(url) {
  const metrics = await (await fetch(url + "/metrics")).text();
  return Number(metrics.match(/^canopy_tokens_computed_total (\S+)$/m)[1]);
}

const codePoints = (s) => [...s].length;

const tests = {
  async lists_the_served_model({ client }) {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => [m.id, m.object]), [[id, "model"]]);
  },

  async echo_scores_every_prompt_token_as_v1_logprobs_rows({ client, url }) {
    const ids = (await post(url, "/v1/tokenize", { text })).tokens;
    const rows = (await post(url, "/v1/logprobs", { tokens: ids, all_positions: true })).logprobs;
    const c = await client.completions.create({
      model: id, prompt: text, max_tokens: 0, echo: true, logprobs: 5,
    });
    assert.equal(c.object, "text_completion");
    assert.deepEqual(c.usage, { prompt_tokens: ids.length, completion_tokens: 0, total_tokens: ids.length });
    const choice = c.choices[0];
    assert.equal(choice.finish_reason, "length");
    const lp = choice.logprobs;
    assert.equal(lp.tokens.length, ids.length);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    for (let i = 1; i < ids.length; ++i) {
      // The same float32 values (JSON writes them with different digits: compare them
      // as float32).
      assert.equal(Math.fround(lp.token_logprobs[i]), Math.fround(rows[i - 1][ids[i]]), `token ${i}`);
      const top = Object.values(lp.top_logprobs[i]);
      assert.ok(top.length >= 1 && top.length <= 5);
      assert.equal(Math.fround(Math.max(...top)), Math.fround(Math.max(...rows[i - 1])),
        `top of token ${i}`);
    }
    // Offsets add up over the tokens' text, and the text is the tokens' bytes.
    let joined = "";
    for (let i = 0; i < ids.length; ++i) {
      assert.equal(lp.text_offset[i], codePoints(joined), `offset ${i}`);
      if (i > 0 || lp.tokens[0] !== "<s>") joined += lp.tokens[i];
    }
    assert.equal(choice.text, joined);
    assert.equal(choice.text.trim(), text);
    // A repeated prompt is answered from the cache: no token computed.
    const before = await tokensComputed(url);
    const again = await client.completions.create({
      model: id, prompt: text, max_tokens: 0, echo: true, logprobs: 5,
    });
    assert.deepEqual(again.choices, c.choices);
    assert.equal(await tokensComputed(url), before);
  },

  async greedy_generation_equals_canopy_sample({ client }) {
    const sampled = JSON.parse(
      execFileSync(cli, ["sample", "--model", model, "--text", "Once upon a time", "--max-tokens",
        "24", "--temperature", "0", "--format", "json"]).toString());
    const c = await client.completions.create({
      model: id, prompt: "Once upon a time", max_tokens: 24, temperature: 0, logprobs: 0,
    });
    const choice = c.choices[0];
    assert.equal(c.usage.completion_tokens, sampled.ids.length);
    assert.equal(choice.logprobs.tokens.length, sampled.ids.length);
    assert.equal(choice.text, sampled.text);
    assert.equal(choice.finish_reason, sampled.ids.length < 24 ? "stop" : "length");
  },

  async streaming_delivers_the_same_tokens({ client }) {
    const request = { model: id, prompt: ["Once upon a time", "The cat"], max_tokens: 16,
      temperature: 0.8, top_p: 0.9, seed: 7, n: 2, logprobs: 2 };
    const whole = await client.completions.create(request);
    const stream = await client.completions.create({ ...request, stream: true,
      stream_options: { include_usage: true } });
    const texts = ["", "", "", ""], tokens = [[], [], [], []], finish = [];
    let usage;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        texts[choice.index] += choice.text;
        if (choice.logprobs) tokens[choice.index].push(...choice.logprobs.tokens);
        if (choice.finish_reason) finish[choice.index] = choice.finish_reason;
      }
    }
    assert.equal(whole.choices.length, 4);
    for (const choice of whole.choices) {
      assert.equal(texts[choice.index], choice.text, `choice ${choice.index}`);
      assert.deepEqual(tokens[choice.index], choice.logprobs.tokens);
      assert.equal(finish[choice.index], choice.finish_reason);
    }
    assert.deepEqual(usage, whole.usage);
  },

  async streamed_tokens_arrive_as_they_are_generated({ client }) {
    // Each chunk leaves when its token is drawn: the chunks spread over the generation
    // instead of arriving together at its end.
    const started = performance.now();
    const stream = await client.completions.create({ model: id, prompt: "Once upon a time",
      max_tokens: 200, temperature: 1, seed: 11, stream: true });
    const arrivals = [];
    for await (const chunk of stream)
      if (chunk.choices[0]?.text) arrivals.push(performance.now());
    const total = performance.now() - started;
    const spread = arrivals.at(-1) - arrivals[0];
    console.log(`  ${arrivals.length} chunks; first after ${(arrivals[0] - started).toFixed(1)} ms, ` +
      `last ${spread.toFixed(1)} ms later, of ${total.toFixed(1)} ms`);
    assert.ok(arrivals.length >= 50, `${arrivals.length} chunks`);
    assert.ok(spread > total / 3, "the chunks came together, not as generated");
  },

  async a_client_leaving_mid_stream_cancels_the_generation({ client, url }) {
    const metric = async (name) => {
      const text = await (await fetch(url + "/metrics")).text();
      return Number(text.match(new RegExp(`^${name} (\\S+)$`, "m"))[1]);
    };
    const cancelledBefore = await metric("canopy_http_cancelled_requests_total");
    const computedBefore = await tokensComputed(url);
    const stream = await client.completions.create({ model: id, prompt: "Once upon a",
      max_tokens: 500, temperature: 1, seed: 5, stream: true });
    for await (const chunk of stream) if (chunk.choices[0]?.text) break; // leaves
    let cancelled;
    for (let i = 0; i < 200; ++i) {
      cancelled = await metric("canopy_http_cancelled_requests_total");
      if (cancelled > cancelledBefore) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(cancelled, cancelledBefore + 1);
    // Long enough for all 500 tokens, had the generation gone on.
    await new Promise((r) => setTimeout(r, 500));
    const computed = (await tokensComputed(url)) - computedBefore;
    assert.ok(computed < 250, `${computed} tokens computed after the client left`);
  },

  async a_streamed_echo_with_stop_strings_reads_as_the_whole_answer({ client }) {
    const free = await client.completions.create({
      model: id, prompt: "Once upon a time", max_tokens: 32, temperature: 0,
    });
    const word = free.choices[0].text.split(" ").slice(3, 4)[0];
    const request = { model: id, prompt: "Once upon a time", max_tokens: 32, temperature: 0,
      echo: true, logprobs: 1, stop: [" " + word.slice(0, 3)] };
    const whole = await client.completions.create(request);
    let streamed = "", offsets = [], finish;
    for await (const chunk of await client.completions.create({ ...request, stream: true })) {
      for (const choice of chunk.choices) {
        streamed += choice.text;
        if (choice.logprobs) offsets.push(...choice.logprobs.text_offset);
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    assert.equal(whole.choices[0].finish_reason, "stop");
    assert.match(whole.choices[0].text, /^ ?Once upon a time/); // the prompt echoed
    assert.equal(streamed, whole.choices[0].text);
    assert.deepEqual(offsets, whole.choices[0].logprobs.text_offset);
    assert.equal(finish, "stop");
  },

  async stop_strings_end_the_text_before_them({ client }) {
    const free = await client.completions.create({
      model: id, prompt: "Once upon a time", max_tokens: 32, temperature: 0,
    });
    const word = free.choices[0].text.split(" ").slice(2, 3)[0];
    const c = await client.completions.create({
      model: id, prompt: "Once upon a time", max_tokens: 32, temperature: 0, stop: [" " + word],
    });
    assert.equal(c.choices[0].finish_reason, "stop");
    assert.equal(c.choices[0].text, free.choices[0].text.slice(0, free.choices[0].text.indexOf(" " + word)));
  },

  async bad_requests_get_openai_errors({ client }) {
    const refused = async (request, status, code) => {
      await assert.rejects(client.completions.create({ model: id, prompt: "Hi", ...request }),
        (e) => {
          assert.ok(e instanceof OpenAI.APIError, String(e));
          assert.equal(e.status, status, e.message);
          assert.equal(e.code, code, e.message);
          assert.equal(e.type, status === 404 ? "not_found_error" : "invalid_request_error");
          return true;
        });
    };
    await refused({ model: "gpt-4" }, 404, "model_not_found");
    await refused({ logprobs: 21 }, 400, "invalid_request");
    await refused({ prompt: [] }, 400, "empty_sequence");
    await refused({ prompt: [1, 999999] }, 400, "token_out_of_range");
    await refused({ max_tokens: 5000 }, 400, "invalid_request");
    await refused({ frequency_penalty: 0.5 }, 400, "invalid_request");
    await refused({ prompt: "x".repeat(3000) }, 400, "sequence_too_long");
  },
};

const server = await serve();
const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
let failed = await runTests(tests, { client, url: server.url });
assert.equal(await server.stop(), 0, "canopy serve exits 0 on SIGTERM");

// An error after a stream has begun is its last event, which the SDK raises: every
// query's deadline passes at once, after the echoed prompt has been streamed.
const hurried = await serve("--query_timeout_ms", "0.001");
try {
  const client = new OpenAI({ baseURL: hurried.url + "/v1", apiKey: "unused", maxRetries: 0 });
  const stream = await client.completions.create({ model: id, prompt: "Once upon a time",
    max_tokens: 4, echo: true, stream: true });
  let echoed = "";
  await assert.rejects(async () => {
    for await (const chunk of stream) echoed += chunk.choices[0]?.text ?? "";
  }, (e) => e instanceof OpenAI.APIError && e.code === "deadline_exceeded");
  assert.match(echoed, /^ ?Once upon a time$/);
  // Before any event, the same error is an ordinary answer with its status.
  await assert.rejects(client.completions.create({ model: id, prompt: "Once upon a time",
    max_tokens: 4, stream: true }), (e) => e.status === 504 && e.code === "deadline_exceeded");
  console.log("ok an_error_mid_stream_is_its_last_event");
} catch (e) {
  ++failed;
  console.log(`FAILED an_error_mid_stream_is_its_last_event\n${e.stack}`);
}
await hurried.stop();

// Bearer auth: the SDK's apiKey is the token.
const dir = mkdtempSync(join(tmpdir(), "canopy-openai-"));
writeFileSync(join(dir, "token"), "s3cret\n");
const guarded = await serve("--auth-token-file", join(dir, "token"));
try {
  const good = new OpenAI({ baseURL: guarded.url + "/v1", apiKey: "s3cret", maxRetries: 0 });
  assert.equal((await good.models.list()).data[0].id, id);
  const bad = new OpenAI({ baseURL: guarded.url + "/v1", apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model: id, prompt: "Hi", max_tokens: 1 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  console.log("ok bearer_auth_takes_the_sdks_api_key");
} catch (e) {
  ++failed;
  console.log(`FAILED bearer_auth_takes_the_sdks_api_key\n${e.stack}`);
}
await guarded.stop();
rmSync(dir, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
