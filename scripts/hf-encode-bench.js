// The HF tokenizers library's encoding speed on a file, for scripts/bench-tokenizers.sh:
//   node scripts/hf-encode-bench.js TOKENIZER_JSON TEXT_FILE REPEAT
// Needs @anush008/tokenizers@0.6.0 on NODE_PATH (npm; a benchmark tool, never part of
// Canopy). Prints one JSON line: ids, checksum (as canopy bench --encode computes it),
// MB/s best and median, one encode call (one sequence) at a time.
const fs = require("fs");
const { Tokenizer } = require("@anush008/tokenizers");

(async () => {
  const [tokenizerPath, textPath, repeatText] = process.argv.slice(2);
  const text = fs.readFileSync(textPath, "utf8");
  const bytes = Buffer.byteLength(text, "utf8");
  const tok = Tokenizer.fromFile(tokenizerPath);
  const speeds = [];
  let ids = [];
  for (let r = 0; r < Number(repeatText || 5); ++r) {
    const started = process.hrtime.bigint();
    const encoding = await tok.encode(text, null, { addSpecialTokens: true });
    ids = encoding.getIds();
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
