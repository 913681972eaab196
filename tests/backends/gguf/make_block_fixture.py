#!/usr/bin/env python3
"""Writes blocks.gguf and blocks.json, the fixture of gguf_file_test: small tensors in
every type Canopy reads, quantized and written by llama.cpp's own gguf-py (numpy only),
and their values as gguf-py dequantizes them. Canopy's reader must give the same
values, so the fixture checks the record layouts against llama.cpp's, not against
Canopy's reading of them.

    make_block_fixture.py --gguf-py DIR   (llama.cpp's gguf-py folder)

Run once; the outputs are committed beside this script.
"""
import argparse
import json
import sys
import types
from pathlib import Path

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gguf-py", type=Path, required=True)
    args = parser.parse_args()
    sys.modules.setdefault("sentencepiece", types.ModuleType("sentencepiece"))
    sys.modules["sentencepiece"].SentencePieceProcessor = None
    sys.path.insert(0, str(args.gguf_py))
    import gguf
    from gguf import quants

    rng = np.random.default_rng(31)
    here = Path(__file__).parent
    writer = gguf.GGUFWriter(str(here / "blocks.gguf"), "llama")
    writer.add_uint32("test.u32", 7)
    writer.add_float32("test.f32", 0.25)
    writer.add_string("test.string", "caf\u00e9")
    writer.add_bool("test.bool", True)
    writer.add_array("test.strings", ["a", "", "\u2581b"])
    writer.add_array("test.floats", [1.5, -2.0])
    expected = {}
    cases = {
        "q8": (gguf.GGMLQuantizationType.Q8_0, (3, 64)),
        "q4": (gguf.GGMLQuantizationType.Q4_0, (2, 96)),
        "f16": (gguf.GGMLQuantizationType.F16, (2, 5)),
        "bf16": (gguf.GGMLQuantizationType.BF16, (3,)),
        "f32": (gguf.GGMLQuantizationType.F32, (2, 3)),
    }
    for name, (kind, shape) in cases.items():
        values = rng.standard_normal(shape).astype(np.float32)
        values.flat[0] = 0.0
        if kind == gguf.GGMLQuantizationType.F32:
            stored = values
        elif kind == gguf.GGMLQuantizationType.F16:
            stored = values.astype(np.float16)
        else:
            stored = quants.quantize(values, kind)
        writer.add_tensor(name, stored, raw_dtype=kind)
        back = quants.dequantize(stored, kind) if kind not in (
            gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else stored
        expected[name] = {"type": kind.name, "shape": list(shape),
                          "values": [float(v) for v in np.asarray(back, np.float32).flat]}
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (here / "blocks.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
