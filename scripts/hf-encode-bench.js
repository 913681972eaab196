// The HF tokenizers library's encoding speed on a file, for scripts/bench-tokenizers.sh:
//   node scripts/hf-encode-bench.js TOKENIZER_JSON TEXT_FILE REPEAT [paragraphs]
// Needs @anush008/tokenizers@0.6.0 on NODE_PATH (npm; a benchmark tool, never part of
// Canopy). Prints one JSON line: ids, checksum (as canopy bench --encode computes it),
// MB/s best and median. By default the whole file is one encode call (one sequence);
// with "paragraphs" it is cut after each blank line and sent in encodeBatch calls of 64
// without special tokens (the library spreads a batch over the cores); the checksum is
// then over the ids of the paragraphs one after another.
const fs = require("fs");
const { Tokenizer } = require("@anush008/tokenizers");

async function encodeWhole(tok, text) {
  const encoding = await tok.encode(text, null, { addSpecialTokens: true });
  return Array.from(encoding.getIds());
}

async function encodeParagraphs(tok, text) {
  const paragraphs = text.split(/(?<=\n\n)/);
  const ids = [];
  for (let i = 0; i < paragraphs.length; i += 64) {
    const encodings = await tok.encodeBatch(paragraphs.slice(i, i + 64), { addSpecialTokens: false });
    for (const e of encodings) ids.push(...e.getIds());
  }
  return ids;
}

(async () => {
  const [tokenizerPath, textPath, repeatText, mode] = process.argv.slice(2);
  const text = fs.readFileSync(textPath, "utf8");
  const bytes = Buffer.byteLength(text, "utf8");
  const tok = Tokenizer.fromFile(tokenizerPath);
  const encode = mode === "paragraphs" ? encodeParagraphs : encodeWhole;
  const speeds = [];
  let ids = [];
  for (let r = 0; r < Number(repeatText || 5); ++r) {
    const started = process.hrtime.bigint();
    ids = await encode(tok, text);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    speeds.push(bytes / 1e6 / seconds);
  }
  let checksum = 0;
  for (let i = 0; i < ids.length; ++i)
    checksum = (checksum + Math.imul(i + 1, ids[i])) >>> 0;
  speeds.sort((a, b) => a - b);
  console.log(JSON.stringify({ ids: ids.length, checksum, mb_per_s_best: speeds[speeds.length - 1],
                               mb_per_s_median: speeds[Math.floor(speeds.length / 2)] }));
})();
