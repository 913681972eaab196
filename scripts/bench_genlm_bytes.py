#!/usr/bin/env python3
"""genlm-bytes' byte-level beam over CanopyLM, with and without the next-byte path.

genlm-bytes' own code, unchanged (../shared/third_party, prepared as the genlm tests
prepare it), prefills a text into a ``ByteBeamState`` and then takes the likeliest next
byte a number of times (logp_next, prune, advance), under two variants, rounds
alternating so that drifts of a noisy machine fall on both alike:
  rows       genlm-bytes' own trie over CanopyLM: each candidate it materializes fetches
             a whole token row and sums it over a byte trie of the vocabulary
  next-byte  canopy_client.genlm_bytes: the same beam, its masses answered by the
             server's next-byte distributions (POST /v1/next_byte), no row fetched
Each variant runs cold (the server's cache cleared first: every row computed) and then
cached (the same run again). The tries are built once, before the runs. From the server's
/metrics, per run: requests by route, answer bytes sent, tokens the model computed. Both variants
must take the same bytes; the script says so.

    python3 scripts/bench_genlm_bytes.py --model ../shared/models/gpt2-synthetic
    python3 scripts/bench_genlm_bytes.py --tokenizer ../shared/models/tokenizers/llama3

(--tokenizer serves the mock model over that tokenizer: a real vocabulary at no model
cost, so that the client's share of the time shows.)
"""
import argparse
import asyncio
import os
import statistics
import time

from genlm_bench_support import ROOT, cpu_name, import_genlm, metric_totals, requests_on

VARIANTS = ("rows", "next-byte")
COUNTERS = (requests_on("/v1/logprobs"), requests_on("/v1/next_byte"),
            r"^canopy_http_sent_bytes_total (\S+)", r"^canopy_tokens_computed_total (\S+)")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    served = p.add_mutually_exclusive_group(required=True)
    served.add_argument("--model", help="a model canopy serve reads")
    served.add_argument("--tokenizer", help="a tokenizer folder: the mock model over it")
    p.add_argument("--canopy", default=os.path.join(ROOT, "build/apps/canopy/canopy"))
    p.add_argument("--shared", default=os.path.join(ROOT, "../shared"),
                   help="the folder holding third_party/ (genlm's sources)")
    p.add_argument("--work", default=os.path.join(ROOT, "build/genlm-bench"),
                   help="where genlm's sources are copied and compiled")
    p.add_argument("--text", default="Once upon a time, there was a little girl")
    p.add_argument("--bytes", type=int, default=16, help="greedy bytes after the text")
    p.add_argument("--beam", type=int, default=8, help="BeamParams.K")
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args()


async def run_beam(make_beam, text, steps):
    """Prefill ``text``, then ``steps`` times the likeliest byte; the bytes taken."""
    beam = await (await make_beam()).prefill(text)
    taken = []
    for _ in range(steps):
        logp = (await beam.logp_next()).ps
        byte = max(range(256), key=lambda b: logp[b])
        taken.append(byte)
        beam = await (beam.prune() << byte)
    return bytes(taken)


def main():
    args = parse_args()
    import_genlm(args.work, args.shared)
    import debian_torch  # the CSR product Debian's torch lacks, as in the genlm tests

    debian_torch.route_csr_products_through_coo()
    from canopy_client import CanopyLM
    from canopy_client.genlm_bytes import NextByteModel, NextByteTrie
    from canopy_client.local_server import LocalServer
    from genlm.backend.tokenization.bytes import get_byte_vocab
    from genlm.bytes import AsyncTokenByteTrie, BeamParams, ByteBeamState
    from genlm.bytes.byte_lm.trie_state import LazyTrieState, TrieMode

    served = (("--model", args.model) if args.model
              else ("--backend", "mock", "--tokenizer", args.tokenizer))
    server = LocalServer(*served, canopy=args.canopy).start()
    lm = CanopyLM(server.url)
    eos = [bytes(lm.byte_vocab[e]) for e in lm.model_info["eos_token_ids"]]
    params = BeamParams(K=args.beam, prune_threshold=0.0, eos_tokens=eos)
    started = time.perf_counter()
    tries = {"rows": (AsyncTokenByteTrie.from_vocab(get_byte_vocab(lm.tokenizer),
                                                    eos_tokens=eos), lm)}
    built_rows = time.perf_counter() - started
    tries["next-byte"] = (NextByteTrie(lm, eos_tokens=eos), NextByteModel(lm))
    built_next = time.perf_counter() - started - built_rows

    def beam_of(variant):
        trie, model = tries[variant]

        async def make():
            state = LazyTrieState.initial(model, trie, mode=TrieMode.WITH_EOS)
            return ByteBeamState([await state.materialize()], params)

        return make

    text = args.text.encode()
    figures = {(v, c): [] for v in VARIANTS for c in ("cold", "cached")}
    taken = {}
    try:
        for _ in range(args.rounds):
            for variant in VARIANTS:
                lm.clear_cache()
                for condition in ("cold", "cached"):
                    before = metric_totals(server.url, COUNTERS)
                    t0 = time.perf_counter()
                    taken[variant] = asyncio.run(run_beam(beam_of(variant), text, args.bytes))
                    wall = time.perf_counter() - t0
                    after = metric_totals(server.url, COUNTERS)
                    figures[variant, condition].append(
                        (wall, *(b - a for a, b in zip(before, after))))
    finally:
        lm.close()
        server.stop()

    name = os.path.basename((args.model or args.tokenizer).rstrip("/"))
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {'model' if args.model else 'mock over'} "
          f"{name}, vocabulary {len(lm.byte_vocab)}; K={args.beam}; prefill "
          f"{len(text)} bytes, then {args.bytes} greedy; median of {args.rounds} rounds")
    print(f"tries built once: genlm-bytes' {built_rows:.2f} s, NextByteTrie {built_next:.2f} s")
    print("| variant | run | s | row requests | next-byte requests | answer MB | tokens computed |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (variant, condition), runs in figures.items():
        wall, rows, next_bytes, sent, computed = (statistics.median(c) for c in zip(*runs))
        print(f"| {variant} | {condition} | {wall:.3f} | {rows:.0f} | {next_bytes:.0f} | "
              f"{sent / 1e6:.2f} | {computed:.0f} |")
    for condition in ("cold", "cached"):
        ratios = [r[0] / n[0] for r, n in zip(figures["rows", condition],
                                              figures["next-byte", condition])]
        print(f"rows / next-byte, {condition}, per round: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}")
    same = taken["rows"] == taken["next-byte"]
    print(f"bytes taken: {taken['next-byte']!r}"
          + ("" if same else f" (rows: {taken['rows']!r}: they differ)"))


if __name__ == "__main__":
    main()
