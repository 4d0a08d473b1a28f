#!/usr/bin/env python3
"""PyTorch side of bench/cuda-sdpa.ts: F.scaled_dot_product_attention (is_causal=True, enable_gqa
where kv heads differ) on the same shapes, device time as the Kiln side measures it: after 5
warm-ups, 15 batches of 20 calls queued behind torch.cuda._sleep between two events, median per call. Writes [{shape, dtype, torch_ms}] to the file given as the first argument."""
import json
import sys

import torch
import torch.nn.functional as F
from torch_timing import device_ms

CASES = [
    ("transformer-block [8,16,512,64]", 8, 16, 16, 512, 64),
    ("qwen3 [1,16,128,128] kv 8", 1, 16, 8, 128, 128),
    ("long [1,16,4096,128]", 1, 16, 16, 4096, 128),
    ("decode q [1,16,1,128] kv 8x4096", 1, 16, 8, 1, 128),
]
KV_LEN = {"decode q [1,16,1,128] kv 8x4096": 4096}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

rows = []
for name, b, h, hk, t, d in CASES:
    for dn, dt in DTYPES.items():
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(b, h, t, d, device="cuda", generator=g).to(dt)
        s_len = KV_LEN.get(name, t)
        k = torch.randn(b, hk, s_len, d, device="cuda", generator=g).to(dt)
        v = torch.randn(b, hk, s_len, d, device="cuda", generator=g).to(dt)
        causal = name not in KV_LEN
        run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != h)
        rows.append({"shape": name, "dtype": dn, "torch_ms": device_ms(run)})
        print(f"torch {name:34s} {dn:9s} {rows[-1]['torch_ms']:.4f} ms", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump(rows, f)
