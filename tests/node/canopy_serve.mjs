// What the node tests share: skipping without ../shared (failing instead under
// CANOPY_REQUIRE_FIXTURES=1), `canopy serve` on a free port, a JSON POST, and running
// named test functions with one line per outcome.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

export const cli = process.env.CANOPY_CLI;
export const shared = process.env.CANOPY_SHARED_DIR ?? "";
export const stories = join(shared, "models/stories260K/stories260K.bin");

/** Skips (77), or fails where CI requires every fixture. */
export function skip(why) {
  if (process.env.CANOPY_REQUIRE_FIXTURES === "1") {
    console.error(`FAILED: ${why} (CANOPY_REQUIRE_FIXTURES=1)`);
    process.exit(1);
  }
  console.log(`SKIPPED: ${why}`);
  process.exit(77);
}

/** Skips unless CANOPY_CLI is set and stories260K is in ../shared. */
export function requireStories() {
  if (!cli || !existsSync(stories)) skip(`needs CANOPY_CLI and ${stories}`);
}

/** Starts `canopy serve` with stories260K on a free port; resolves to {url, stop}. */
export function serve(...extra) {
  return new Promise((resolve, reject) => {
    const child = spawn(cli, ["serve", "--port", "0", "--model", stories, ...extra], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m)
        resolve({
          url: m[1],
          stop: () =>
            new Promise((done) => {
              child.on("exit", (code) => done(code));
              child.kill("SIGTERM");
            }),
        });
    });
    child.on("exit", (code) => reject(new Error(`canopy serve exited ${code}: ${out}`)));
  });
}

/** POSTs `body` as JSON; the answer's JSON, asserting a 200. */
export async function post(url, path, body, headers = {}) {
  const r = await fetch(url + path, { method: "POST", body: JSON.stringify(body), headers });
  assert.equal(r.status, 200, `${path}: ${await r.clone().text()}`);
  return r.json();
}

/** Runs each of `tests` (name -> async function of `context`); the number that failed. */
export async function runTests(tests, context) {
  let failed = 0;
  for (const [name, test] of Object.entries(tests)) {
    try {
      await test(context);
      console.log(`ok ${name}`);
    } catch (e) {
      ++failed;
      console.log(`FAILED ${name}\n${e.stack}`);
    }
  }
  return failed;
}
