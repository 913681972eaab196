#!/usr/bin/env python3
"""genlm-control's SMC over CanopyLM: where its time goes, one HTTP request per particle
per step against one batch request per step.

genlm-control's own code, unchanged (../shared/third_party, prepared as the genlm tests
prepare it), runs ``direct_token_sampler(PromptedLLM(lm)).smc(n_particles=64,
ess_threshold=0.5, max_tokens=30)`` from a fixed prompt, under three variants, rounds
alternating so that drifts of a noisy machine fall on all of them alike:
  instant      the same SMC over a model that answers at once with one fixed row:
               genlm-control's and llamppl's own time, which no server can remove
  per-request  CanopyLM(coalesce=False): each particle's next_token_logprobs is its own
               request (what the client did before coalescing)
  coalesced    CanopyLM() (the default): the queries of one event-loop turn, an SMC
               step's particles, are one batch request
The server is a ``canopy serve --model MODEL`` this script starts; its cache is cleared
before every run, so each run computes its rows. From the server's /metrics, per run:
the HTTP requests, the model's passes and the seconds the backend computed.

    python3 scripts/bench_genlm_smc.py --model ../shared/models/stories260K/stories260K.bin
"""
import argparse
import asyncio
import os
import statistics
import time

from genlm_bench_support import ROOT, cpu_name, import_genlm, metric_totals, requests_on

VARIANTS = ("instant", "per-request", "coalesced")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a model canopy serve reads")
    p.add_argument("--canopy", default=os.path.join(ROOT, "build/apps/canopy/canopy"))
    p.add_argument("--shared", default=os.path.join(ROOT, "../shared"),
                   help="the folder holding third_party/ (genlm's sources)")
    p.add_argument("--work", default=os.path.join(ROOT, "build/genlm-bench"),
                   help="where genlm's sources are copied and compiled")
    p.add_argument("--particles", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=30)
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--variants", default=",".join(VARIANTS))
    return p.parse_args()


def server_counters(url):
    """(logprobs requests, passes, compute seconds) from the server's /metrics."""
    return metric_totals(url, (requests_on("/v1/logprobs"),
                               r"^canopy_worker_passes_total\{[^}]*\} (\S+)",
                               r"^canopy_compute_seconds_total (\S+)"))


def main():
    args = parse_args()
    variants = args.variants.split(",")
    import_genlm(args.work, args.shared)
    from canopy_client import CanopyLM
    from canopy_client.local_server import LocalServer
    from genlm.control import PromptedLLM, direct_token_sampler

    server = LocalServer("--model", args.model, canopy=args.canopy).start()
    clients = {"per-request": CanopyLM(server.url, coalesce=False),
               "coalesced": CanopyLM(server.url)}
    instant = CanopyLM(server.url)
    prompt = instant.tokenizer.encode(args.prompt)
    fixed_row = instant.next_token_logprobs_sync(prompt)

    async def answer_at_once(token_ids):
        return fixed_row

    instant.next_token_logprobs = answer_at_once
    clients["instant"] = instant
    samplers = {}
    for name in variants:
        llm = PromptedLLM(clients[name])
        llm.prompt_ids = prompt
        samplers[name] = direct_token_sampler(llm)

    async def smc(sampler):
        return await sampler.smc(n_particles=args.particles, ess_threshold=0.5,
                                 max_tokens=args.max_tokens)

    figures = {name: [] for name in variants}
    try:
        for name in variants:  # warm-up: vocabularies, connections, first passes
            asyncio.run(smc(samplers[name]))
        for _ in range(args.rounds):
            for name in variants:
                instant.clear_cache()
                before = server_counters(server.url)
                started = time.perf_counter()
                asyncio.run(smc(samplers[name]))
                wall = time.perf_counter() - started
                after = server_counters(server.url)
                figures[name].append((wall, *(b - a for a, b in zip(before, after))))
    finally:
        for client in clients.values():
            client.close()
        server.stop()

    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; model {os.path.basename(args.model)}; "
          f"{args.particles} particles x {args.max_tokens} tokens; median of {args.rounds} rounds")
    print("| variant | s per SMC run | requests | passes | backend s | over instant |")
    print("|---|---|---|---|---|---|")
    floor = statistics.median(f[0] for f in figures["instant"]) if "instant" in figures else None
    for name in variants:
        wall, requests, passes, compute = (statistics.median(column)
                                           for column in zip(*figures[name]))
        extra = "" if floor is None else f"{wall - floor:+.3f} s"
        print(f"| {name} | {wall:.3f} | {requests:.0f} | {passes:.0f} | {compute:.3f} | {extra} |")
    if "per-request" in figures and "coalesced" in figures:
        ratios = [p[0] / c[0] for p, c in zip(figures["per-request"], figures["coalesced"])]
        print(f"per-request / coalesced, per round: {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
