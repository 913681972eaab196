#!/usr/bin/env python3
"""genlm-backend's AsyncTransformer on the workloads of `canopy bench`, on the same model
and device, and Canopy's answers against a float32 reference beside the peer's.

Workloads, as canopy bench runs them (bench_workloads.cpp), with this process's own draws:
  smc      64 particles extend a 16-token random prompt for 64 steps; each step every
           particle awaits next_token_logprobs (asyncio.gather, as genlm-control's SMC
           does), samples a token from the model and is weighted towards the model
           sharpened to temperature 0.8; multinomial resampling when the ESS falls under
           half the particles.
  scoring  every prefix of 32 random sequences of 256 tokens, all asked at once.
The peer runs as genlm users run it: AsyncTransformer.from_name(model directory), default
batch size (20) and timeout (20 ms), no cache_kv (so each batch recomputes its sequences).

Then a sample of answers: the first scoring sequence, scored at every position by `canopy logprobs --all-positions` (Canopy's engine, same device and
dtype) and by the peer, each against HF's model in float32 (TF32 off) on the same rows:
KL(float32 || answer) per row and the top token. bfloat16 keeps 8 bits (u = 2^-8): the
bound is the test suite's, KL at most 0.1 nats per row (tests/backends/reduced_precision_compute_test.cpp).

genlm-backend pins transformers < 5; where the machine has 5.x, what genlm-backend calls
and 5.x removed (DynamicCache.from_legacy_cache, a cache indexed by layer, a GPT-2
tokenizer's byte_decoder) is restored here, on transformers' classes, and the output says
so. genlm's own code is imported unchanged from --genlm (../shared/third_party). Its byte
vocabulary of a byte-level BPE tokenizer asks the hub for 'gpt2'; offline, the script runs
in a folder where 'gpt2' names --gpt2.

Prints a Markdown table last (Canopy's figures from --canopy-json, canopy bench --json).
"""
import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="HF model directory (canopy make-model)")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--genlm", required=True, help="folder holding genlm-backend (third_party)")
    p.add_argument("--gpt2", required=True,
                   help="a folder with GPT-2's tokenizer (vocab.json, merges.txt, config.json): "
                        "genlm-backend loads 'gpt2' for its byte decoder, offline from here")
    p.add_argument("--canopy", help="the canopy program, for the answer comparison")
    p.add_argument("--canopy-json", help="canopy bench --json output, for the table")
    p.add_argument("--particles", type=int, default=64)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--prompt-length", type=int, default=16)
    p.add_argument("--sequences", type=int, default=32)
    p.add_argument("--sequence-length", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="write the figures here as JSON")
    return p.parse_args()


def restore_transformers_v4_api(transformers):
    """AsyncTransformer (genlm-backend, transformers < 5) calls
    DynamicCache.from_legacy_cache(list of (k, v) per layer, or None) and reads a cache as
    cache[layer][0 or 1]; transformers 5 removed both. Returns what was restored."""
    from transformers import DynamicCache

    restored = []
    if not hasattr(DynamicCache, "from_legacy_cache"):

        def from_legacy_cache(cls, past=None):
            cache = cls()
            for layer, (keys, values) in enumerate(past or ()):
                cache.update(keys, values, layer)
            return cache

        DynamicCache.from_legacy_cache = classmethod(from_legacy_cache)
        restored.append("DynamicCache.from_legacy_cache")
    try:
        probe = DynamicCache()
        import torch

        probe.update(torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1), 0)
        probe[0][0]
    except Exception:

        def layer_pair(self, layer):
            return self.layers[layer].keys, self.layers[layer].values

        DynamicCache.__getitem__ = layer_pair
        restored.append("DynamicCache.__getitem__")
    from transformers import AutoTokenizer

    gpt2 = AutoTokenizer.from_pretrained("gpt2", use_fast=False)
    if not hasattr(gpt2, "byte_decoder"):
        # GPT-2's byte-level alphabet: printable bytes stand for themselves, the others for
        # the code points from 256 up, in byte order.
        printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
        others = [b for b in range(256) if b not in printable]
        decoder = {chr(b): b for b in printable}
        decoder.update({chr(256 + i): b for i, b in enumerate(others)})
        type(gpt2).byte_decoder = property(lambda self: decoder)
        restored.append(f"{type(gpt2).__name__}.byte_decoder")
    return restored


def gpu_used_mib():
    """The device's memory in use as nvidia-smi reads it (None without nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def quantile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class gpu_peak:
    """The device's peak allocated bytes over a block (torch's allocator)."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def __enter__(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc):
        self.bytes = (self.torch.cuda.max_memory_allocated()
                      if self.device.startswith("cuda") else 0)


async def timed(lm, tokens, latencies):
    t0 = time.perf_counter()
    row = await lm.next_token_logprobs(tokens)
    latencies.append(time.perf_counter() - t0)
    return row


async def run_smc(torch, lm, a, vocab):
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    prompt = torch.randint(0, vocab, (a.prompt_length,), generator=g).tolist()
    particles = [list(prompt) for _ in range(a.particles)]
    log_w = [0.0] * a.particles
    latencies, queries, requested = [], 0, 0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        rows = await asyncio.gather(*(timed(lm, p, latencies) for p in particles))
        queries += len(particles)
        requested += sum(len(p) for p in particles)
        rows = torch.stack([r.float() for r in rows])
        tokens = torch.multinomial(rows.exp(), 1, generator=None).squeeze(1)
        sharpened = torch.log_softmax(rows / 0.8, dim=-1)
        increments = (sharpened.gather(1, tokens[:, None]) - rows.gather(1, tokens[:, None]))
        for i, (t, inc) in enumerate(zip(tokens.tolist(), increments.squeeze(1).tolist())):
            particles[i].append(t)
            log_w[i] += inc
        top = max(log_w)
        w = [math.exp(x - top) for x in log_w]
        if sum(w) ** 2 / sum(x * x for x in w) < a.particles / 2:
            picks = torch.multinomial(torch.tensor(w), a.particles, replacement=True, generator=g)
            particles = [list(particles[j]) for j in picks.tolist()]
            log_w = [0.0] * a.particles
    return time.perf_counter() - t0, queries, requested, latencies


def scoring_sequences(torch, a, vocab):
    g = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    return [torch.randint(0, vocab, (a.sequence_length,), generator=g).tolist()
            for _ in range(a.sequences)]


async def run_scoring(torch, lm, a, vocab):
    sequences = scoring_sequences(torch, a, vocab)
    prefixes = [s[:n] for s in sequences for n in range(1, len(s) + 1)]
    latencies = []
    t0 = time.perf_counter()
    await asyncio.gather(*(timed(lm, p, latencies) for p in prefixes))
    return time.perf_counter() - t0, len(prefixes), sum(len(p) for p in prefixes), latencies


def canopy_rows(a, tokens):
    """Canopy's rows after every prefix of `tokens`, from `canopy logprobs`."""
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        subprocess.run([a.canopy, "logprobs", "--model", a.model, "--all-positions",
                        "--tokens", ",".join(map(str, tokens)), "--format", "f32",
                        "--out", f.name, "--devices", json.dumps([a.device]),
                        "--dtype", a.dtype], check=True, stdout=subprocess.DEVNULL)
        import numpy as np

        return np.fromfile(f.name, dtype="<f4").reshape(len(tokens), -1)


def agreement(torch, reference, rows):
    """Largest and median KL(reference || rows) per row, and the share of rows whose top
    token is the reference's."""
    ref = reference.double()
    got = torch.as_tensor(rows).double().to(ref.device)
    kl = (ref.exp() * (ref - got)).sum(-1)
    same = (ref.argmax(-1) == got.argmax(-1)).double().mean().item()
    return {"largest_kl": kl.max().item(), "median_kl": kl.median().item(),
            "top_token_kept": same, "rows": ref.shape[0],
            "largest_abs_error": (ref - got).abs().max().item()}


def main():
    a = parse_args()
    for path in ("model", "genlm", "gpt2", "canopy", "canopy_json", "out"):
        if getattr(a, path):
            setattr(a, path, os.path.abspath(getattr(a, path)))
    sys.path.insert(0, os.path.join(a.genlm, "genlm-backend"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    here = tempfile.mkdtemp()
    os.symlink(a.gpt2, os.path.join(here, "gpt2"))
    os.chdir(here)
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"peer not run: {e} (genlm-backend needs torch and transformers)")
        return 0
    restored = restore_transformers_v4_api(transformers)
    from genlm.backend.llm import AsyncTransformer

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, a.dtype)
    dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; restored "
          f"for genlm-backend: {', '.join(restored) or 'nothing'}", flush=True)
    gpu_before = gpu_used_mib()
    t0 = time.perf_counter()
    lm = AsyncTransformer.from_name(a.model, hf_opts={dtype_key: dtype, "device_map": a.device})
    vocab = lm.model.config.vocab_size
    print(f"AsyncTransformer loaded in {time.perf_counter() - t0:.1f} s", flush=True)

    computed = [0]

    def count_tokens(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if mask is not None and ids is not None:
            computed[0] += int(mask[:, -ids.shape[1]:].sum())
        elif ids is not None:
            computed[0] += ids.numel()

    lm.model.register_forward_pre_hook(count_tokens, with_kwargs=True)

    figures = {"peer": "genlm-backend AsyncTransformer", "transformers": transformers.__version__,
               "torch": torch.__version__, "device": a.device, "dtype": a.dtype,
               "restored": restored, "results": []}
    for name, run in (("smc", run_smc), ("scoring", run_scoring)):
        lm.clear_cache()
        computed[0] = 0
        with gpu_peak(torch, a.device) as peak:
            seconds, queries, requested, latencies = asyncio.run(run(torch, lm, a, vocab))
        figures["results"].append({
            "workload": name, "queries": queries, "seconds": seconds,
            "queries_per_second": queries / seconds, "tokens_requested": requested,
            "tokens_computed": computed[0], "tokens_computed_per_second": computed[0] / seconds,
            "latency_us": {"p50": 1e6 * quantile(latencies, 0.5),
                           "p99": 1e6 * quantile(latencies, 0.99)},
            "gpu_peak_allocated_bytes": peak.bytes})
        print(json.dumps(figures["results"][-1]), flush=True)
    # The caching allocator keeps what the workloads reserved: the device's reading now is
    # the peer's footprint (context, weights, reserve), as the device script reads Canopy's.
    gpu_after = gpu_used_mib()
    figures["gpu_used_mib"] = (gpu_after - gpu_before) if None not in (gpu_before, gpu_after) else None

    if a.canopy:
        # The float32 reference: HF's model in float32 on the same device, TF32 off.
        reference = transformers.AutoModelForCausalLM.from_pretrained(
            a.model, **{dtype_key: torch.float32, "device_map": a.device}).eval()
        tokens = scoring_sequences(torch, a, vocab)[0]
        with torch.no_grad():
            ids = torch.tensor([tokens], device=a.device)
            ref = torch.log_softmax(reference(ids).logits[0].float(), -1)
            peer = torch.log_softmax(lm.model(ids).logits[0].float(), -1)
        figures["answers"] = {"scoring": {
            "tokens": len(tokens),
            "canopy": agreement(torch, ref, canopy_rows(a, tokens)),
            "peer": agreement(torch, ref, peer.cpu())}}
        print(json.dumps(figures["answers"]), flush=True)

    if a.out:
        with open(a.out, "w") as f:
            json.dump(figures, f, indent=1)
    print_table(a, figures)
    return 0


def print_table(a, figures):
    canopy = {}
    if a.canopy_json and os.path.exists(a.canopy_json):
        try:
            with open(a.canopy_json) as f:
                canopy = {r["workload"]: r for r in json.load(f)["results"]}
        except (ValueError, KeyError) as e:
            print(f"canopy bench output unreadable: {e}")
    print(f"AsyncTransformer's GPU memory after the workloads: {figures.get('gpu_used_mib')} MiB "
          "(nvidia-smi, less the reading before loading)")
    print("| workload | engine | queries/s | tokens computed | p50 ms | p99 ms | torch peak GiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for peer in figures["results"]:
        w = peer["workload"]
        rows = [("AsyncTransformer", peer, peer["gpu_peak_allocated_bytes"])]
        if w in canopy:
            rows.insert(0, ("Canopy", canopy[w], None))
        for engine, r, gpu in rows:
            print(f"| {w} | {engine} | {r['queries_per_second']:,.0f} | {r['tokens_computed']:,} | "
                  f"{r['latency_us']['p50'] / 1e3:.1f} | {r['latency_us']['p99'] / 1e3:.1f} | "
                  f"{'%.2f' % (gpu / 2**30) if gpu is not None else '-'} |")
        if w in canopy:
            print(f"| {w} | Canopy / AsyncTransformer | "
                  f"{canopy[w]['queries_per_second'] / peer['queries_per_second']:.1f}x | | | | |")
    for name, ans in figures.get("answers", {}).items():
        for engine in ("canopy", "peer"):
            s = ans[engine]
            print(f"| answers {name} | {engine} vs float32 | KL max {s['largest_kl']:.2e} "
                  f"(median {s['median_kl']:.1e}) | top token {100 * s['top_token_kept']:.0f}% "
                  f"of {s['rows']} | max abs {s['largest_abs_error']:.3f} | | |")


if __name__ == "__main__":
    sys.exit(main())
