#!/usr/bin/env python3
"""Writes a Canopy Llama checkpoint as a GGUF F32 file for llama.cpp, with llama.cpp's
own gguf-py writer (numpy only).

    to_gguf.py CHECKPOINT OUT.gguf --gguf-py DIR

CHECKPOINT: an HF directory (config.json + model.safetensors, float32/16/bf16) or a
llama2.c .bin (legacy version 0). Plain Llama only: no biases or q/k norms (llama.cpp
reads those from other keys, and the benchmark does not need them). Llama 3's rope
scaling ("llama3") becomes the rope_freqs tensor, computed in float32 as llama.cpp's
converter does (conversion/llama.py); other RoPE scalings are refused.

Layouts. llama.cpp rotates the pairs (2j, 2j+1) of each head, as Meta and llama2.c
store q/k; HF checkpoints store them permuted for rotate_half (pairs j, j + hd/2).
HF q/k rows are put back: within each head, row c*hd/2 + j goes to row 2j + c.
llama2.c rows are already interleaved and are written as they are.

With --tokenizer FILE (a llama2.c tokenizer.bin / tok512.bin) the file carries it as
llama.cpp's converter writes a SentencePiece vocabulary (model "llama": tokens with
U+2581 for a space, scores, token types); without, it has none (tokenizer.ggml.model =
"no_vocab"): the benchmark feeds token ids.
"""
import argparse
import json
import struct
import sys
import types
from pathlib import Path

import numpy as np


def load_gguf(gguf_py):
    # gguf/__init__ imports its vocabulary helpers, which need sentencepiece; the
    # writer does not.
    sys.modules.setdefault("sentencepiece", types.ModuleType("sentencepiece"))
    sys.modules["sentencepiece"].SentencePieceProcessor = None
    sys.path.insert(0, str(gguf_py))
    import gguf
    return gguf


def read_safetensors(path):
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    base = 8 + size
    kinds = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        data = raw[base + start:base + end]
        if spec["dtype"] == "BF16":
            bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif spec["dtype"] in kinds:
            array = np.frombuffer(data, dtype=kinds[spec["dtype"]])
        else:
            sys.exit(f"{path}: tensor {name} has dtype {spec['dtype']} (F32, F16, BF16 only)")
        out[name] = array.astype(np.float32).reshape(spec["shape"])
    return out


def to_interleaved(w, heads):
    """rotate_half rows of each head back to llama.cpp's interleaved pairs."""
    hd = w.shape[0] // heads
    return w.reshape(heads, 2, hd // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_freqs(hp, scaling):
    """One factor per rotated pair, which ggml's rope divides that frequency by."""
    dim = hp["head_dim"]
    freqs = np.float32(1.0) / (np.float32(hp["theta"]) **
                               (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    factor = np.float32(scaling.get("factor", 8.0))
    low = np.float32(scaling.get("low_freq_factor", 1.0))
    high = np.float32(scaling.get("high_freq_factor", 4.0))
    old = np.float32(scaling.get("original_max_position_embeddings", 8192))
    out = []
    for freq in freqs:
        wavelen = np.float32(2 * np.pi) / freq
        if wavelen < old / high:
            out.append(np.float32(1))
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(np.float32(1) / ((np.float32(1) - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def from_hf(directory):
    c = json.loads((directory / "config.json").read_text())
    if c.get("model_type") != "llama":
        sys.exit(f"{directory}: model_type {c.get('model_type')!r}; only plain Llama converts")
    scaling = c.get("rope_scaling") or {}
    if (scaling and scaling.get("rope_type") != "llama3") or c.get("attention_bias"):
        sys.exit(f"{directory}: RoPE scaling other than llama3, or attention biases, are "
                 "not converted")
    t = read_safetensors(directory / "model.safetensors")
    heads, kv_heads = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hp = dict(dim=c["hidden_size"], hidden=c["intermediate_size"], layers=c["num_hidden_layers"],
              heads=heads, kv_heads=kv_heads, vocab=c["vocab_size"],
              context=c["max_position_embeddings"], eps=c["rms_norm_eps"],
              theta=c.get("rope_theta", 10000.0), head_dim=c.get("head_dim", c["hidden_size"] // heads))
    tensors = {"token_embd.weight": t["model.embed_tokens.weight"],
               "output_norm.weight": t["model.norm.weight"]}
    if "lm_head.weight" in t and not c.get("tie_word_embeddings", False):
        tensors["output.weight"] = t["lm_head.weight"]
    if scaling:
        tensors["rope_freqs.weight"] = llama3_rope_freqs(hp, scaling)
    for i in range(hp["layers"]):
        p = f"model.layers.{i}."
        tensors.update({
            f"blk.{i}.attn_norm.weight": t[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": to_interleaved(t[p + "self_attn.q_proj.weight"], heads),
            f"blk.{i}.attn_k.weight": to_interleaved(t[p + "self_attn.k_proj.weight"], kv_heads),
            f"blk.{i}.attn_v.weight": t[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": t[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": t[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": t[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": t[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": t[p + "mlp.down_proj.weight"],
        })
    return hp, tensors


def from_llama2c(path):
    raw = path.read_bytes()
    dim, hidden, layers, heads, kv_heads, vocab, context = struct.unpack("<7i", raw[:28])
    untied = vocab < 0
    vocab = abs(vocab)
    hd = dim // heads
    data = np.frombuffer(raw[28:], dtype=np.float32)
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        out = data[at:at + n].reshape(shape)
        at += n
        return out

    embed = take(vocab, dim)
    att_norm = take(layers, dim)
    wq, wk = take(layers, heads * hd, dim), take(layers, kv_heads * hd, dim)
    wv, wo = take(layers, kv_heads * hd, dim), take(layers, dim, heads * hd)
    ffn_norm = take(layers, dim)
    w1, w2, w3 = take(layers, hidden, dim), take(layers, dim, hidden), take(layers, hidden, dim)
    final_norm = take(dim)
    take(context, hd // 2)  # llama2.c's RoPE tables, recomputed by llama.cpp
    take(context, hd // 2)
    hp = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
              vocab=vocab, context=context, eps=1e-5, theta=10000.0, head_dim=hd)
    tensors = {"token_embd.weight": embed, "output_norm.weight": final_norm}
    if untied:
        tensors["output.weight"] = take(vocab, dim)
    for i in range(layers):
        tensors.update({
            f"blk.{i}.attn_norm.weight": att_norm[i], f"blk.{i}.attn_q.weight": wq[i],
            f"blk.{i}.attn_k.weight": wk[i], f"blk.{i}.attn_v.weight": wv[i],
            f"blk.{i}.attn_output.weight": wo[i], f"blk.{i}.ffn_norm.weight": ffn_norm[i],
            f"blk.{i}.ffn_gate.weight": w1[i], f"blk.{i}.ffn_up.weight": w3[i],
            f"blk.{i}.ffn_down.weight": w2[i],
        })
    return hp, tensors


def add_sentencepiece_vocab(w, gguf, path):
    """llama2.c's pieces (spaces already read) as SentencePiece tokens: ids 0-2 unk, BOS,
    EOS (control), 3-258 the byte pieces <0xHH>."""
    raw = path.read_bytes()
    at, tokens, scores = 4, [], []
    while at < len(raw):
        score, length = struct.unpack("<fi", raw[at:at + 8])
        tokens.append(raw[at + 8:at + 8 + length].decode("utf-8").replace(" ", "\u2581"))
        scores.append(score)
        at += 8 + length
    types = [gguf.TokenType.CONTROL if i in (1, 2) else gguf.TokenType.UNKNOWN if i == 0
             else gguf.TokenType.BYTE if 3 <= i < 259 else gguf.TokenType.NORMAL
             for i in range(len(tokens))]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizer", type=Path,
                        help="a llama2.c tokenizer file to carry (tokenizer.bin, tok512.bin)")
    parser.add_argument("--gguf-py", type=Path, required=True,
                        help="llama.cpp's gguf-py folder (build/peers/llama.cpp/src/gguf-py)")
    args = parser.parse_args()
    gguf = load_gguf(args.gguf_py)
    hp, tensors = (from_hf if args.checkpoint.is_dir() else from_llama2c)(args.checkpoint)
    w = gguf.GGUFWriter(str(args.out), "llama")
    if args.tokenizer:
        add_sentencepiece_vocab(w, gguf, args.tokenizer)
    metadata = {  # GGUFWriter.add_<key>(value)
        "name": args.checkpoint.name, "context_length": hp["context"],
        "embedding_length": hp["dim"], "block_count": hp["layers"],
        "feed_forward_length": hp["hidden"], "head_count": hp["heads"],
        "head_count_kv": hp["kv_heads"], "key_length": hp["head_dim"],
        "value_length": hp["head_dim"], "rope_dimension_count": hp["head_dim"],
        "layer_norm_rms_eps": hp["eps"], "rope_freq_base": hp["theta"],
        "vocab_size": hp["vocab"], "file_type": gguf.LlamaFileType.ALL_F32,
    }
    if not args.tokenizer:
        metadata["tokenizer_model"] = "no_vocab"
    for key, value in metadata.items():
        getattr(w, "add_" + key)(value)
    for name, array in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: {len(tensors)} tensors, vocab {hp['vocab']}, {hp['layers']} layers")


if __name__ == "__main__":
    main()
