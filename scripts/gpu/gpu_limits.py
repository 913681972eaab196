#!/usr/bin/env python3
"""What the GPU allows a Llama of a given config.json, measured in pure PyTorch (issue 32).

Prints one JSON document of:
  copy_gbs        device-to-device copy rate, bytes copied per second (each byte is read
                  once and written once), over a 2 GiB tensor: the decode bound divides the
                  weight bytes by this
  matmul_tflops   the bf16 matrix-product peak (square products of 8192)
  weight_bytes    the model's matrices in bfloat16 (what one decode step reads)
  decode          one decode step of the model's shape (random bfloat16 weights, KV cache
                  of `--cached` tokens per sequence) at several batch sizes, eager and
                  replayed as a CUDA graph, with the rows' log_softmax and their copy to
                  pinned host memory: the ceiling Canopy's passes aim at
  sdpa            which of scaled_dot_product_attention's kernels accept Canopy's masks
                  (an additive [G, H, n, L] bfloat16 mask; a causal one without a mask)

Usage: gpu_limits.py --config MODEL/config.json [--device cuda:0] [--cached 128]
On a CPU (practice) the CUDA-only parts report "n/a".
"""
import argparse
import json
import math
import time

import torch


def timed(fn, device, repeats):
    """Median seconds of fn() over `repeats` runs, after two warm-up runs."""
    for _ in range(2):
        fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def copy_rate(device):
    n = (2 << 30) if device.type == "cuda" else (64 << 20)
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = timed(lambda: dst.copy_(src), device, 10)
    return n / seconds / 1e9


def matmul_peak(device):
    n = 8192 if device.type == "cuda" else 512
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = timed(lambda: torch.mm(a, b), device, 10)
    return 2 * n ** 3 / seconds / 1e12


class DecodeStep:
    """One decode step over a fixed-size KV cache: static shapes and no host work, so it
    can be captured as a CUDA graph. Every sequence sits at position `cached` (the KV of
    positions 0..cached-1 is already there); the new token's KV is written at `cached`
    through an index tensor, and attention reads positions 0..cached with a mask of
    fixed length, as a replayed graph must."""

    def __init__(self, cfg, batch, cached, device, dtype):
        D, H = cfg["hidden_size"], cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads", H)
        F, V, layers = cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
        hd = D // H
        self.H, self.KV, self.hd, self.dtype = H, KV, hd, dtype
        g = torch.Generator(device="cpu").manual_seed(1)

        def w(*shape):
            return (torch.randn(*shape, generator=g) / math.sqrt(shape[-1])).to(device, dtype)

        self.layers = [dict(qkv=w((H + 2 * KV) * hd, D), out=w(D, H * hd),
                            gate_up=w(2 * F, D), down=w(D, F),
                            n1=torch.ones(D, device=device, dtype=dtype),
                            n2=torch.ones(D, device=device, dtype=dtype))
                       for _ in range(layers)]
        self.embed = w(V, D)
        self.head = w(V, D)
        self.norm = torch.ones(D, device=device, dtype=dtype)
        length = cached + 1
        self.k = [torch.randn(batch, KV, length, hd, generator=g).to(device, dtype)
                  for _ in range(layers)]
        self.v = [torch.randn(batch, KV, length, hd, generator=g).to(device, dtype)
                  for _ in range(layers)]
        self.tokens = torch.randint(0, V, (batch,), generator=g).to(device)
        self.slot = torch.tensor([cached], device=device)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        angle = cached * inv
        self.cos = torch.cat([angle.cos(), angle.cos()]).to(device, dtype)
        self.sin = torch.cat([angle.sin(), angle.sin()]).to(device, dtype)
        self.rows_host = torch.empty(batch, V, dtype=torch.float32,
                                     pin_memory=device.type == "cuda")
        self.weight_bytes = 2 * sum(t.numel() for L in self.layers for t in L.values()) + \
            2 * (self.head.numel())

    def rms(self, x, weight):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * weight

    def rotate(self, x):
        half = self.hd // 2
        return x * self.cos + torch.cat([-x[..., half:], x[..., :half]], -1) * self.sin

    def forward(self):
        B, H, KV, hd = self.tokens.shape[0], self.H, self.KV, self.hd
        x = self.embed.index_select(0, self.tokens)
        for l, L in enumerate(self.layers):
            qkv = self.rms(x, L["n1"]) @ L["qkv"].t()
            q = self.rotate(qkv[:, :H * hd].view(B, H, 1, hd))
            k = self.rotate(qkv[:, H * hd:(H + KV) * hd].view(B, KV, 1, hd))
            v = qkv[:, (H + KV) * hd:].view(B, KV, 1, hd)
            self.k[l].index_copy_(2, self.slot, k)
            self.v[l].index_copy_(2, self.slot, v)
            o = torch.nn.functional.scaled_dot_product_attention(
                q, self.k[l], self.v[l], enable_gqa=True) if hasattr(
                torch.nn, "attention") else self.attention_by_matmul(q, l)
            x = x + o.reshape(B, H * hd) @ L["out"].t()
            gu = self.rms(x, L["n2"]) @ L["gate_up"].t()
            F = gu.shape[1] // 2
            x = x + (torch.nn.functional.silu(gu[:, :F]) * gu[:, F:]) @ L["down"].t()
        logits = self.rms(x, self.norm) @ self.head.t()
        return torch.log_softmax(logits.float(), -1)

    def attention_by_matmul(self, q, l):
        B, H, KV, hd = q.shape[0], self.H, self.KV, self.hd
        k = self.k[l].repeat_interleave(H // KV, 1)
        v = self.v[l].repeat_interleave(H // KV, 1)
        p = torch.softmax((q @ k.transpose(-1, -2)).float() / math.sqrt(hd), -1).to(q.dtype)
        return p @ v


def decode_figures(cfg, device, cached):
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    out = []
    for batch in ([1, 16, 64, 256] if device.type == "cuda" else [1, 4]):
        step = DecodeStep(cfg, batch, cached, device, dtype)
        row = {"batch": batch}
        with torch.no_grad():
            row["eager_ms"] = 1e3 * timed(step.forward, device, 20)
            rows = step.forward()
            row["copy_rows_ms"] = 1e3 * timed(
                lambda: step.rows_host.copy_(rows, non_blocking=True), device, 20)
            if device.type == "cuda":
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        step.forward()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    graph_rows = step.forward()
                row["graph_ms"] = 1e3 * timed(graph.replay, device, 50)

                def replay_and_copy():
                    graph.replay()
                    step.rows_host.copy_(graph_rows, non_blocking=True)

                row["graph_and_copy_ms"] = 1e3 * timed(replay_and_copy, device, 50)
                del graph
        row["weight_bytes"] = step.weight_bytes
        out.append(row)
        del step
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return out


def sdpa_kernels(device):
    if device.type != "cuda" or not hasattr(torch.nn, "attention"):
        return "n/a"
    from torch.nn.attention import SDPBackend, sdpa_kernel
    G, H, n, L, hd = 4, 32, 64, 256, 64
    q = torch.randn(G, H, n, hd, device=device, dtype=torch.bfloat16)
    k = torch.randn(G, H, L, hd, device=device, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    mask = torch.zeros(G, 1, n, L, device=device, dtype=torch.bfloat16)
    mask[..., L - 8:] = float("-inf")
    out = {}
    for backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]:
        for label, kwargs in [("additive mask", {"attn_mask": mask}),
                              ("causal, no mask", {"is_causal": True})]:
            try:
                with sdpa_kernel([backend]):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
                out[f"{backend.name}, {label}"] = "ok"
            except Exception as e:  # each backend refuses in its own words
                out[f"{backend.name}, {label}"] = "refused: " + str(e).split("\n")[0][:80]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    p.add_argument("--cached", type=int, default=128)
    a = p.parse_args()
    device = torch.device(a.device)
    cfg = json.load(open(a.config))
    figures = {"torch": torch.__version__, "device": str(device),
               "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "copy_gbs": copy_rate(device), "matmul_tflops": matmul_peak(device),
               "sdpa": sdpa_kernels(device)}
    figures["decode"] = decode_figures(cfg, device, a.cached)
    figures["weight_bytes"] = figures["decode"][0]["weight_bytes"]
    figures["decode_bound_ms"] = 1e3 * figures["weight_bytes"] / (figures["copy_gbs"] * 1e9)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
