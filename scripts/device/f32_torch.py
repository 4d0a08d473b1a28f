#!/usr/bin/env python3
"""PyTorch side of the f32 round (scripts/device/f32.sh): device time of qwen3-0.6b's float32 GEMMs
(F.linear, x [128,K] by weight [N,K], as Kiln's linear) in exact fp32 (allow_tf32 False, torch's
default 'highest') and in TF32, F.scaled_dot_product_attention f32 on [1,16,128,128] causal with
8 kv heads, and add + F.rms_norm f32 on [128,1024]. Device time as bench/cuda-sdpa.ts measures it:
5 warm-ups, then 15 batches of 20 calls queued behind torch.cuda._sleep between two events,
median per call. Prints one line per row and writes [{name, dtype, torch_ms, tflops}] to argv[1]."""
import json
import sys

import torch
import torch.nn.functional as F
from torch_timing import device_ms

GEMMS = [("qkv", 1024, 4096), ("o", 2048, 1024), ("gate_up", 1024, 6144), ("down", 3072, 1024), ("lm_head", 1024, 151936)]
M = 128


rows = []
g = torch.Generator(device="cuda").manual_seed(1)
for name, k, n in GEMMS:
    x = torch.randn(M, k, device="cuda", generator=g)
    w = torch.randn(n, k, device="cuda", generator=g) * k ** -0.5
    for prec, tf32 in (("fp32", False), ("tf32", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = device_ms(lambda: F.linear(x, w))
        tf = 2 * M * k * n / ms / 1e9
        rows.append({"name": f"gemm {name} [{M}x{k}]@[{k}x{n}]", "dtype": prec, "torch_ms": ms, "tflops": tf})
        print(f"torch gemm {name:8s} [{M}x{k}]@[{k}x{n}] {prec} {ms * 1000:8.1f} us {tf:6.1f} TFLOP/s", flush=True)
torch.backends.cuda.matmul.allow_tf32 = False

q = torch.randn(1, 16, 128, 128, device="cuda", generator=g)
kk = torch.randn(1, 8, 128, 128, device="cuda", generator=g)
v = torch.randn(1, 8, 128, 128, device="cuda", generator=g)
ms = device_ms(lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True))
rows.append({"name": "sdpa qwen3 [1,16,128,128] kv 8", "dtype": "float32", "torch_ms": ms, "tflops": None})
print(f"torch sdpa qwen3 f32 {ms * 1000:.1f} us", flush=True)

x = torch.randn(128, 1024, device="cuda", generator=g)
r = torch.randn(128, 1024, device="cuda", generator=g)
wn = torch.ones(1024, device="cuda")
ms = device_ms(lambda: F.rms_norm(x + r, (1024,), wn, 1e-6))
rows.append({"name": "add+rms_norm [128,1024]", "dtype": "float32", "torch_ms": ms, "tflops": None})
print(f"torch add+rms_norm f32 [128,1024] {ms * 1000:.1f} us", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump(rows, f)
