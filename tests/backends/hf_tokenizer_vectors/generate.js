// Writes small tokenizer.json files that use what the three real files of ../shared do
// not (Metaspace, every Split behaviour, inverted splits, unk with fuse_unk, NFKC,
// lstrip/rstrip and normalized added tokens, Strip and Replace decoders), and
// vectors.json: their encodings and decodings by the HF tokenizers library itself.
//   npm install @anush008/tokenizers@0.6.0 && node generate.js
// The files it writes are committed; hf_tokenizer_test.cpp checks Canopy against them.
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("@anush008/tokenizers");

const META = "\u2581";

// A SentencePiece-style vocabulary: specials, 256 byte pieces, characters, some merges.
function sentencepiece_model({ byte_fallback, fuse_unk }) {
  const vocab = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  if (byte_fallback)
    for (let b = 0; b < 256; ++b)
      vocab["<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">"] = Object.keys(vocab).length;
  const chars = META + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-";
  for (const c of chars) vocab[c] = Object.keys(vocab).length;
  const merges = [
    [META, "t"], ["h", "e"], [META + "t", "he"], ["i", "n"], ["a", "n"], ["e", "r"],
    [META, "a"], ["o", "n"], ["in", "g"], [META, "w"], ["o", "r"], [META + "w", "or"],
    ["l", "d"], [META + "wor", "ld"], ["1", "2"], ["12", "3"],
  ];
  for (const [a, b] of merges) vocab[a + b] = Object.keys(vocab).length;
  return {
    type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk, byte_fallback, vocab,
    merges: merges.map(([a, b]) => a + " " + b),
  };
}

function added(id, content, extra = {}) {
  return Object.assign({ id, content, single_word: false, lstrip: false, rstrip: false,
                         normalized: false, special: true }, extra);
}

function tokenizer(model, parts, extra_added = []) {
  return Object.assign({
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")].concat(extra_added),
    normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, model,
  }, parts);
}

function split(behavior, pattern, invert = false) {
  return { type: "Split", pattern, behavior, invert };
}

const bos_template = {
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
           { SpecialToken: { id: "</s>", type_id: 0 } }],
  pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
  special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] },
                    "</s>": { id: "</s>", ids: [2], tokens: ["</s>"] } },
};

const fallback = sentencepiece_model({ byte_fallback: true, fuse_unk: false });
const unk_only = sentencepiece_model({ byte_fallback: false, fuse_unk: true });
const n = Object.keys(fallback.vocab).length;

const tokenizers = {
  metaspace_first: tokenizer(fallback, {
    normalizer: { type: "Sequence", normalizers: [
      { type: "NFKC" }, { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
    pre_tokenizer: { type: "Metaspace", replacement: META, prepend_scheme: "first", split: true },
    post_processor: bos_template,
    decoder: { type: "Sequence", decoders: [
      { type: "Metaspace", replacement: META, prepend_scheme: "first", split: true },
      { type: "ByteFallback" }, { type: "Fuse" }] },
  }, [added(n, "<mask>", { lstrip: true, rstrip: true, special: false }),
      added(n + 1, "hello", { normalized: true, special: false })]),
  metaspace_always_nosplit: tokenizer(fallback, {
    pre_tokenizer: { type: "Metaspace", replacement: META, prepend_scheme: "always", split: false },
    decoder: { type: "Metaspace", replacement: META, prepend_scheme: "always", split: false },
  }),
  unk_fused_digits_previous: tokenizer(unk_only, {
    normalizer: { type: "Replace", pattern: { String: " " }, content: META },
    pre_tokenizer: split("MergedWithPrevious", { Regex: "[0-9]" }),
    decoder: { type: "Sequence", decoders: [
      { type: "Replace", pattern: { String: META }, content: " " },
      { type: "Strip", content: " ", start: 1, stop: 0 }] },
  }),
  split_next_contiguous: tokenizer(fallback, {
    normalizer: { type: "Replace", pattern: { String: " " }, content: META },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      split("MergedWithNext", { String: META }), split("Contiguous", { Regex: "[.,!?]" })] },
    decoder: { type: "Sequence", decoders: [
      { type: "Replace", pattern: { Regex: "\u2581+" }, content: " " },
      { type: "ByteFallback" }, { type: "Fuse" }] },
  }),
  split_removed_inverted: tokenizer(fallback, {
    normalizer: { type: "NFKD" },
    pre_tokenizer: split("Removed", { Regex: "[a-z]+" }, true),
  }),
};

const texts = [
  "", " ", "the world", "  the  world  ", "The World!", "hello there", "sayhello hello",
  "a <mask> b", "a<mask>b", "<mask>", "x  <mask>  y", "<s>the</s>", "caf\u00e9 na\u00efve",
  "\ufb01ne \u2460\u2461", "\u{1F999} emoji \u00e9\u00e9", "123 4567 89", "one, two... three!?",
  "tab\tand\nnewline", "\u00a0non-breaking", "x\u00ffy\u20ac",
];

(async () => {
  const vectors = {};
  for (const [name, spec] of Object.entries(tokenizers)) {
    const file = name + ".json";
    fs.writeFileSync(path.join(__dirname, file), JSON.stringify(spec, null, 1) + "\n");
    const tok = Tokenizer.fromFile(path.join(__dirname, file));
    const cases = [];
    for (const text of texts) {
      const plain = await tok.encode(text, null, { addSpecialTokens: false });
      const special = await tok.encode(text, null, { addSpecialTokens: true });
      const ids = Array.from(plain.getIds());
      cases.push({ text, ids, ids_with_special: Array.from(special.getIds()),
                   decoded: await tok.decode(ids, false) });
    }
    vectors[name] = { tokenizer: file, cases };
  }
  fs.writeFileSync(path.join(__dirname, "vectors.json"),
                   JSON.stringify({ generator: "HF tokenizers through @anush008/tokenizers@0.6.0",
                                    tokenizers: vectors }, null, 1) + "\n");
})();
