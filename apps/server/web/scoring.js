// A whole text scored at once: /v1/completions with echo and no new tokens gives every
// prompt token's log-prob given the tokens before it; each token is shown in a colour
// from green (likely) to red (unlikely), its log-prob in its tooltip and data.

import { post } from "./api.js";

/** Hue 120 (green) at log-prob 0 down to 0 (red) at -8 and below. */
function colourOf(logprob) {
  const hue = 120 * Math.max(0, 1 + logprob / 8);
  return `hsl(${hue.toFixed(0)} 70% 80%)`;
}

export function setUpScoring(model, servedId, onError) {
  const note = document.getElementById("scoring-note");
  const button = document.getElementById("score");
  const out = document.getElementById("scored");
  if (!model.tokenizer) {
    note.textContent = "Scoring text needs a model with a tokenizer.";
    button.disabled = true;
    return;
  }
  note.textContent =
    "Each token coloured by its log-prob given the text before it (the first has none).";
  button.addEventListener("click", async () => {
    try {
      out.dataset.state = "asking";
      const answer = await post("/v1/completions", {
        model: servedId,
        prompt: document.getElementById("scoring-text").value,
        max_tokens: 0,
        echo: true,
        logprobs: 0,
      });
      const { tokens, token_logprobs: logprobs } = answer.choices[0].logprobs;
      out.replaceChildren(
        ...tokens.map((text, i) => {
          const span = document.createElement("span");
          span.className = "scored-token";
          span.textContent = text;
          const logprob = logprobs[i];
          if (logprob !== null) {
            span.dataset.logprob = logprob;
            span.style.background = colourOf(logprob);
            span.title = `log-prob ${logprob.toFixed(3)}`;
          }
          return span;
        }),
      );
      out.dataset.state = "shown";
    } catch (e) {
      onError(e.message);
    }
  });
}
