// The trie of cached prefixes, as a tree that opens one level at a time: each node's
// last token, how often queries passed through it, whether it holds a row, its KV on
// each worker (device or host tier), the queries using it now and how many children it
// has. The root and each opened node are asked for again at every refresh
// (POST /v1/cache/tree, one level each), so the tree follows the cache live.

import { post } from "./api.js";
import { bytes } from "./cache_view.js";
import { tokenText } from "./vocab.js";

function describe(node) {
  const parts = [`${node.hits} hits`];
  if (node.row_bytes) parts.push(`row ${bytes(node.row_bytes)}`);
  for (const kv of node.kv) parts.push(`KV w${kv.worker} ${kv.tier} ${bytes(kv.bytes)}`);
  if (node.locks) parts.push(`${node.locks} in use`);
  if (node.children) parts.push(`${node.children} below`);
  return parts.join(" \u00b7 ");
}

export class TrieView {
  constructor(root) {
    this.root = root;
    this.open = new Set([""]); // prefixes shown opened: "" is the root
    this.levels = new Map(); // prefix -> its children, from the last refresh
  }

  toggle(prefix) {
    if (this.open.has(prefix)) this.open.delete(prefix);
    else this.open.add(prefix);
    return this.refresh();
  }

  async refresh() {
    const asked = [...this.open];
    const answers = await Promise.all(
      asked.map((prefix) =>
        post("/v1/cache/tree", {
          tokens: prefix === "" ? [] : prefix.split(",").map(Number),
          depth: 1,
          max_children: 32,
        }),
      ),
    );
    this.levels = new Map();
    asked.forEach((prefix, i) => {
      // An opened prefix the cache no longer holds has no nodes: it closes.
      if (answers[i].nodes.length === 0) this.open.delete(prefix);
      else this.levels.set(prefix, answers[i]);
    });
    this.render();
  }

  render() {
    const top = this.levels.get("");
    const list = document.createElement("ul");
    list.className = "trie";
    if (top) list.append(...this.children("", top));
    this.root.replaceChildren(list);
    this.root.dataset.state = "shown";
  }

  /** The list items of a level's children, each with its own opened level inside, and
   * how many the level left out (the least used). */
  children(prefix, level) {
    const shown = level.nodes.slice(1);
    const items = shown.map((node) => {
      const path = prefix === "" ? `${node.token}` : `${prefix},${node.token}`;
      const item = document.createElement("li");
      item.className = "trie-node";
      item.dataset.prefix = path;
      item.dataset.hits = node.hits;
      item.dataset.rowBytes = node.row_bytes;
      item.dataset.kv = node.kv.length;
      const toggle = document.createElement("button");
      toggle.className = "toggle";
      toggle.disabled = node.children === 0;
      toggle.textContent = node.children === 0 ? "\u00b7" : this.open.has(path) ? "\u25be" : "\u25b8";
      toggle.addEventListener("click", () => this.toggle(path));
      const token = document.createElement("span");
      token.className = "chip";
      token.textContent = tokenText(node.token);
      token.title = `id ${node.token}`;
      const info = document.createElement("span");
      info.className = "muted";
      info.textContent = describe(node);
      item.append(toggle, token, " ", info);
      const below = this.levels.get(path);
      if (this.open.has(path) && below) {
        const list = document.createElement("ul");
        list.append(...this.children(path, below));
        item.append(list);
      }
      return item;
    });
    const left = level.nodes[0].children - shown.length;
    if (left > 0) {
      const more = document.createElement("li");
      more.className = "muted";
      more.textContent = `\u2026 and ${left} more, less used`;
      items.push(more);
    }
    return items;
  }
}
