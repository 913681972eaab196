// The playground's context panels. A panel holds a context (token ids) and shows the
// model's next-token distribution after it as bars, largest first: each bar a button
// that extends the context by its token. "Step back" drops the last token; "Sample"
// draws one from the model at the page's temperature. Two panels side by side compare
// contexts (the second starts as a copy of the first).

import { post } from "./api.js";
import { tokenText } from "./vocab.js";

const idList = /^\s*\d+(\s*,\s*\d+)*\s*$/;

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

export class ContextPanel {
  /** `root` gets the panel template; `settings()` gives {topK, temperature}. */
  constructor(root, model, settings, onError) {
    this.root = root;
    this.model = model;
    this.settings = settings;
    this.onError = onError;
    this.tokens = [];
    this.asked = 0;
    root.append(document.getElementById("panel-template").content.cloneNode(true));
    this.input = root.querySelector(".context-input");
    this.contextView = root.querySelector(".context");
    this.bars = root.querySelector(".bars");
    this.note = root.querySelector(".panel-note");
    root.querySelector(".context-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.guard(() => this.setFromInput(this.input.value));
    });
    root.querySelector(".back").addEventListener("click", () =>
      this.guard(() => this.setTokens(this.tokens.slice(0, -1))),
    );
    root.querySelector(".sample").addEventListener("click", () =>
      this.guard(() => this.sample()),
    );
    this.render([]);
  }

  /** Runs an action, reporting its failure instead of leaving the page stuck. */
  async guard(action) {
    try {
      await action();
    } catch (e) {
      this.onError(e.message);
    }
  }

  async setFromInput(value) {
    if (idList.test(value)) {
      return this.setTokens(value.split(",").map((s) => Number(s.trim())));
    }
    if (!this.model.tokenizer)
      throw new Error("this model has no tokenizer: give token ids, such as 1,403,407");
    const { tokens } = await post("/v1/tokenize", { text: value });
    return this.setTokens(tokens);
  }

  async setTokens(tokens) {
    this.tokens = tokens;
    const asked = ++this.asked; // a later context's answer wins over an earlier one's
    this.root.dataset.state = "asking";
    if (tokens.length === 0) return this.show([], asked);
    const { topK } = this.settings();
    const answer = await post("/v1/logprobs", { tokens, top_k: topK });
    this.show(
      answer.ids.map((id, i) => ({ id, logprob: answer.logprobs[i] })),
      asked,
    );
  }

  show(choices, asked) {
    if (asked !== this.asked) return;
    this.render(choices);
    // Tests and scripts wait for this: the bars are those of these tokens.
    this.root.dataset.tokens = this.tokens.join(",");
    this.root.dataset.state = "shown";
  }

  async sample() {
    if (this.tokens.length === 0) throw new Error("give a context first");
    const { temperature } = this.settings();
    const seed = Math.floor(Math.random() * 2 ** 31);
    const answer = await post("/v1/sample", {
      tokens: this.tokens,
      max_tokens: 1,
      temperature,
      seed,
    });
    return this.setTokens([...this.tokens, ...answer.tokens]);
  }

  render(choices) {
    this.contextView.replaceChildren(
      ...this.tokens.map((id) => {
        const chip = element("span", "chip", tokenText(id));
        chip.title = `id ${id}`;
        return chip;
      }),
    );
    this.note.textContent =
      this.tokens.length === 0
        ? "Set a context to see what the model expects next."
        : `${this.tokens.length} tokens; the ${choices.length} likeliest next tokens:`;
    const top = choices.length ? Math.exp(choices[0].logprob) : 1;
    this.bars.replaceChildren(
      ...choices.map(({ id, logprob }) => {
        const bar = element("button", "bar");
        bar.dataset.id = id;
        bar.dataset.logprob = logprob;
        bar.title = `id ${id}: log-prob ${logprob}`;
        const fill = element("span", "fill");
        fill.style.width = `${(100 * Math.exp(logprob)) / top}%`;
        bar.append(
          fill,
          element("span", "token", tokenText(id)),
          element("span", "logprob", logprob.toFixed(3)),
          element("span", "prob", `${(100 * Math.exp(logprob)).toFixed(1)}%`),
        );
        bar.addEventListener("click", () =>
          this.guard(() => this.setTokens([...this.tokens, id])),
        );
        return bar;
      }),
    );
  }
}
