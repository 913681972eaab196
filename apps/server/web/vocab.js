// Token ids as people read them: each id's bytes (GET /v1/vocab, read once) decoded as
// UTF-8, with the invisible made visible. A model without a tokenizer has no bytes, so
// its ids show as #id.

import { get } from "./api.js";

let texts = null; // id -> display text, or null without a tokenizer

const decoder = new TextDecoder("utf-8", { fatal: false });

function bytesOf(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; ++i) out[i] = parseInt(hex.substr(2 * i, 2), 16);
  return out;
}

/** Spaces, newlines and tabs drawn, so that " the" and "the" differ on screen. */
function visible(text) {
  return text.replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
}

export async function loadVocab(hasTokenizer) {
  if (!hasTokenizer) return;
  const body = await get("/v1/vocab");
  const special = body.special_tokens ?? {};
  texts = body.vocab.map((hex, id) =>
    hex === null ? (special[id] ?? `<${id}>`) : visible(decoder.decode(bytesOf(hex))),
  );
}

export function tokenText(id) {
  return texts?.[id] ?? `#${id}`;
}
