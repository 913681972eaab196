#!/usr/bin/env python3
"""Canopy against llama.cpp, side by side: the same workloads on the same models,
alternating runs, the same number of compute threads; prints each run and a table of
median ratios (Canopy / llama.cpp, queries per second) against the targets.

    scripts/peers/build-llama-cpp.sh            # once: llama.cpp and llama_cpp_peer
    scripts/peers/bench_llama_cpp.py [--threads 1] [--rounds 3] [--formats f32,q8_0,q4_0]

Models: stories260K (../shared) and a ~110M synthetic Llama that `canopy make-model`
writes under build/peers/models. Each is converted to GGUF F32 (to_gguf.py, llama.cpp's
gguf-py writer) and the conversion is checked first: llama.cpp's log-probs after every
prefix must agree with Canopy's within 1e-4 on the oracle's cases (stories260K). The
110M model has no float64 oracle; on a random 32-token sequence the two float32
implementations must agree within 1e-3 (their sums of 768 and 2048 products, through
12 layers, round differently: Canopy's own two forwards differ by about 1e-4 there).

Llama 3's rope scaling travels in GGUF as a rope_freqs tensor: llama3-synthetic
(../shared) converted so must give, through llama.cpp and through Canopy alike, every
oracle case within the oracle's tolerance.

Canopy also loads the GGUF files themselves (llama.cpp's gguf-py wrote the F32 one,
llama-quantize the Q8_0 and Q4_0 ones): on the same sequence its rows from each file
must be those of the checkpoint it came from, run with the file's weight format (the
blocks are taken as llama-quantize wrote them, and its reference rounding is the one
Canopy's int8 and int4 use). They are the same weights and the same arithmetic, but
not always the same bits: OpenBLAS's float32 sums may round differently from one run
to the next (their order follows the buffers' alignment), which the 110M model's
fragile logits grow to about 1e-4; so within the limits above, and for Q8_0 and Q4_0
64 of the int8 activation steps more, absolute and relative, as the bench's own check
allows (a sum rounded apart may cross a step).

Weight formats: f32 (Canopy float32), q8_0 (Canopy --weight_dtype int8 against
llama-quantize's Q8_0 of the F32 file) and q4_0 (int4 against Q4_0 with the token
embeddings and output kept in Q8_0, as Canopy's int4 keeps them in int8). Both sides
quantize weights with llama.cpp's reference rounding, but round activations apart
(llama.cpp's scales are float16), so a quantized format is checked by what it loses:
Canopy's mean KL per row from llama.cpp's F32 rows, on a random 64-token sequence, at
most 1.5 times llama.cpp's own (plus 0.01).

Workloads (each side computes the next-token log-probs of every query):
  decode   one sequence, greedy, one query in flight (llama.cpp: one decode a token)
  smc      64 particles x 64 steps from a 16-token prompt, resampled when ESS < 32
           (llama.cpp: a batched decode a step, the prompt shared by sequence copies)
  scoring  every prefix of 32 random 64-token sequences (llama.cpp: one decode with
           logits at every position)
Threads: Canopy's matmuls use OpenBLAS's pool, set to --threads (OPENBLAS_NUM_THREADS,
and threads_per_worker); llama.cpp gets n_threads = --threads.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

root = Path(__file__).resolve().parents[2]
peers = root / "build" / "peers"
shared = root.parent / "shared"

targets = {  # (model, workload, format): Canopy / llama.cpp queries/s at least
    ("stories260K", "decode", "f32"): 1.0, ("llama110m", "decode", "f32"): 1.0,
    ("stories260K", "smc", "f32"): 2.0, ("llama110m", "smc", "f32"): 1.3,
    ("stories260K", "scoring", "f32"): 1.2, ("llama110m", "scoring", "f32"): 1.2,
    ("llama110m", "decode", "q8_0"): 1.0, ("llama110m", "decode", "q4_0"): 1.0,
}
weight_dtypes = {"f32": None, "q8_0": "int8", "q4_0": "int4"}
quantize_flags = {"q8_0": ["--pure"],
                  "q4_0": ["--pure", "--output-tensor-type", "q8_0",
                           "--token-embedding-type", "q8_0"]}


def run(cmd, env=None, **kwargs):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, env=env,
                          **kwargs)


def canopy_rows(canopy, model, tokens, env, weight_dtype=None):
    with tempfile.NamedTemporaryFile(suffix=".f32") as out:
        run([canopy, "logprobs", "--model", model, "--tokens", ",".join(map(str, tokens)),
             "--all-positions", "--format", "f32", "--out", out.name]
            + (["--weight_dtype", weight_dtype] if weight_dtype else []), env=env)
        return np.fromfile(out.name, dtype=np.float32)


def peer_rows(peer, gguf, tokens):
    out = run([peer, "rows", gguf, "--tokens", ",".join(map(str, tokens))]).stdout
    return np.frombuffer(out, dtype=np.float32)


def check_agreement(args, name, model, gguf, env):
    if name == "stories260K":
        cases = json.loads((shared / "oracle/stories260K/cases.json").read_text())
        sequences = [c["tokens"] for c in cases]
        limit = 1e-4
    else:
        sequences = [list(np.random.default_rng(1).integers(0, 32000, 32))]
        limit = 1e-3
    worst = 0.0
    for tokens in sequences:
        a = canopy_rows(args.canopy, model, tokens, env)
        b = peer_rows(args.peer, gguf, tokens)
        if a.shape != b.shape:
            sys.exit(f"{name}: Canopy gave {a.size} values, llama.cpp {b.size}")
        worst = max(worst, float(np.abs(a - b).max()))
    print(f"{name}: llama.cpp agrees with Canopy within {worst:.2e} on {len(sequences)} "
          f"sequence(s) (limit {limit:g})")
    if worst > limit:
        sys.exit(f"{name}: the conversion disagrees: {worst:.2e} > {limit:g}")


def check_gguf(args, name, model, weights, fmt, env):
    """Canopy on the GGUF file gives the source checkpoint's rows."""
    vocab, limit = (512, 1e-4) if name == "stories260K" else (32000, 1e-3)
    tokens = list(np.random.default_rng(2).integers(0, vocab, 32))
    from_gguf = canopy_rows(args.canopy, weights, tokens, env)
    from_source = canopy_rows(args.canopy, model, tokens, env, weight_dtypes[fmt])
    # Blocks round each product's activations to int8 steps (1/254 of a block's
    # largest): a float32 sum that rounds apart between the two runs (OpenBLAS's order
    # follows the buffers' alignment) may cross a step and move every later input. The
    # bench's own check allows 64 such steps, absolute and relative (bench_runner.cpp).
    u = 1 / 254 if fmt in ("q8_0", "q4_0") else 0.0
    difference = np.abs(from_gguf - from_source)
    allowed = limit + 64 * u * (1 + np.abs(from_source))
    worst = float(difference.max())
    print(f"{name} {fmt}: Canopy on the GGUF file against its source: largest difference "
          f"{worst:g} (limit {limit:g} + {64 * u:g} x (1 + |value|))")
    if (difference > allowed).any():
        sys.exit(f"{name} {fmt}: Canopy answers differently from the GGUF file")


def mean_kl(reference, rows, vocab):
    p, q = (r.astype(np.float64).reshape(-1, vocab) for r in (reference, rows))
    return float((np.exp(p) * (p - q)).sum(1).mean())


def check_quantized(args, name, model, gguf, weights, fmt, env):
    """Both sides' quantized rows against llama.cpp's F32 rows: the same weights in
    the same blocks must lose about as much (the sides round activations differently)."""
    tokens = list(np.random.default_rng(1).integers(0, 32000, 64))
    reference = peer_rows(args.peer, gguf, tokens)
    vocab = reference.size // len(tokens)
    ours = mean_kl(reference, canopy_rows(args.canopy, model, tokens, env,
                                          weight_dtypes[fmt]), vocab)
    theirs = mean_kl(reference, peer_rows(args.peer, weights, tokens), vocab)
    print(f"{name} {fmt}: mean KL from F32 per row, Canopy {ours:.4f}, llama.cpp {theirs:.4f}")
    if ours > 1.5 * theirs + 0.01:
        sys.exit(f"{name} {fmt}: Canopy's quantized rows lose more than llama.cpp's")


def check_rope_freqs(args, env):
    """llama3-synthetic's rope scaling as rope_freqs: both sides on the oracle's cases."""
    gguf = peers / "gguf" / "llama3-synthetic.gguf"
    gguf.parent.mkdir(parents=True, exist_ok=True)
    if not gguf.exists():
        run([sys.executable, Path(__file__).parent / "to_gguf.py",
             shared / "models/llama3-synthetic", gguf, "--gguf-py",
             peers / "llama.cpp/src/gguf-py"])
    oracle = shared / "oracle/llama3-synthetic"
    cases = json.loads((oracle / "cases.json").read_text())
    worst = {"llama.cpp": 0.0, "Canopy": 0.0}
    for c in cases:
        want = np.fromfile(oracle / c["file"], dtype=np.float32)
        for side, rows in (("llama.cpp", peer_rows(args.peer, gguf, c["tokens"])),
                           ("Canopy", canopy_rows(args.canopy, gguf, c["tokens"], env))):
            if rows.shape != want.shape:
                sys.exit(f"llama3-synthetic: {side} gave {rows.size} values, the oracle "
                         f"{want.size}")
            worst[side] = max(worst[side], float(np.abs(rows - want).max()))
    limit = min(c["tolerance_abs"] for c in cases)
    print(f"llama3-synthetic as GGUF (rope_freqs): against the oracle, llama.cpp "
          f"{worst['llama.cpp']:.2e}, Canopy {worst['Canopy']:.2e} (limit {limit:g})")
    if max(worst.values()) > limit:
        sys.exit("llama3-synthetic: rope_freqs are read apart from the oracle's scaling")


def canopy_run(args, model, workload, steps, env, weight_dtype):
    flags = {"decode": ["--workload", "decode", "--steps", steps],
             "smc": ["--workload", "smc", "--particles", 64, "--steps", steps],
             "scoring": ["--workload", "scoring", "--sequences", 32, "--sequence-length", 64]}
    out = run([args.canopy, "bench", "--model", model, "--variants", "full", "--json",
               "--threads_per_worker", args.threads] + flags[workload] + args.settings.split()
              + (["--weight_dtype", weight_dtype] if weight_dtype else []),
              env=env).stdout
    doc = json.loads(out)
    machine.update(cpu=doc["cpu"], cpu_kernels=doc["cpu_kernels"])
    if weight_dtype:
        machine[weight_dtype] = doc["model"]["weight_kernels"]
    r = doc["results"][0]
    return r["queries"] / r["seconds"]


# What the runs said of the machine: its CPU, the kernels of Canopy's float32 products
# and those its int8 and int4 products chose on it (the table means little without them).
machine = {}


def peer_run(args, gguf, workload, steps):
    flags = {"decode": ["decode", gguf, "--steps", steps],
             "smc": ["smc", gguf, "--particles", 64, "--steps", steps],
             "score": ["score", gguf, "--sequences", 32, "--length", 64]}
    mode = "score" if workload == "scoring" else workload
    out = run([args.peer] + flags[mode] + ["--threads", args.threads]).stdout
    r = json.loads(out)
    return r["queries"] / r["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="alternations per workload")
    parser.add_argument("--canopy", type=Path, default=root / "build/apps/canopy/canopy")
    parser.add_argument("--peer", type=Path, default=peers / "llama_cpp_peer")
    parser.add_argument("--models", default="stories260K,llama110m")
    parser.add_argument("--workloads", default="decode,smc,scoring")
    parser.add_argument("--formats", default="f32,q8_0,q4_0",
                        help="weight formats, f32, q8_0 and q4_0 (stories260K: f32 only; "
                             "its 172-wide MLP is no whole number of blocks for llama.cpp)")
    parser.add_argument("--settings", default="",
                        help="engine settings for Canopy's runs, e.g. '--scheduler_threads 1'")
    args = parser.parse_args()
    for needed in (args.canopy, args.peer):
        if not needed.exists():
            sys.exit(f"{needed} is missing: build Canopy, then run scripts/peers/build-llama-cpp.sh")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads))
    models = {"stories260K": shared / "models/stories260K/stories260K.bin",
              "llama110m": peers / "models/llama110m"}
    if not models["llama110m"].exists():
        run([args.canopy, "make-model", "--arch", "llama", "--hidden", 768, "--layers", 12,
             "--heads", 12, "--vocab", 32000, "--context", 1024, "--out", models["llama110m"]])
    # decode and smc steps: fewer on the 110M model, whose steps cost ~100x more.
    steps = {("stories260K", "decode"): 256, ("llama110m", "decode"): 64,
             ("stories260K", "smc"): 64, ("llama110m", "smc"): 64}
    check_rope_freqs(args, env)
    table = []
    for name in args.models.split(","):
        model = models[name]
        gguf = peers / "gguf" / f"{name}.gguf"
        gguf.parent.mkdir(parents=True, exist_ok=True)
        if not gguf.exists():
            run([sys.executable, Path(__file__).parent / "to_gguf.py", model, gguf,
                 "--gguf-py", peers / "llama.cpp/src/gguf-py"])
        check_agreement(args, name, model, gguf, env)
        for fmt in args.formats.split(","):
            if fmt != "f32" and name == "stories260K":
                continue
            weights = gguf if fmt == "f32" else gguf.with_name(f"{name}-{fmt}.gguf")
            if not weights.exists():
                run([peers / "llama.cpp/build/bin/llama-quantize"] + quantize_flags[fmt]
                    + [gguf, weights, fmt.upper()])
            check_gguf(args, name, model, weights, fmt, env)
            if fmt != "f32":
                check_quantized(args, name, model, gguf, weights, fmt, env)
            for workload in args.workloads.split(","):
                s = steps.get((name, workload), 0)
                ratios, ours, theirs = [], [], []
                for i in range(args.rounds):
                    c = canopy_run(args, model, workload, s, env, weight_dtypes[fmt])
                    p = peer_run(args, weights, workload, s)
                    ours.append(c)
                    theirs.append(p)
                    ratios.append(c / p)
                    print(f"  {name} {fmt} {workload} round {i + 1}: Canopy {c:.1f} q/s, "
                          f"llama.cpp {p:.1f} q/s, ratio {c / p:.2f}", flush=True)
                table.append((name, fmt, workload, statistics.median(ours),
                              statistics.median(theirs), statistics.median(ratios),
                              targets.get((name, workload, fmt))))
    blocks = {w: k for w, k in machine.items() if w not in ("cpu", "cpu_kernels")}
    print(f"\n{machine.get('cpu', 'CPU not reported')}; Canopy's float32 "
          f"{machine.get('cpu_kernels', 'kernels not reported')}; block kernels: "
          + (", ".join(f"{w} {k}" for w, k in blocks.items()) or "none run"))
    print(f"threads {args.threads}, {args.rounds} alternations, medians (queries/s)"
          + (f"; Canopy settings: {args.settings}" if args.settings else ""))
    print(f"{'model':12} {'weights':7} {'workload':9} {'Canopy':>10} {'llama.cpp':>10} "
          f"{'ratio':>6}  target")
    for name, fmt, workload, c, p, ratio, goal in table:
        verdict = "-" if goal is None else f">= {goal} " + ("PASS" if ratio >= goal else "BELOW")
        print(f"{name:12} {fmt:7} {workload:9} {c:10.1f} {p:10.1f} {ratio:6.2f}  {verdict}")


if __name__ == "__main__":
    main()
