#!/usr/bin/env python3
"""PyTorch side of bench/cuda-conv.ts: torch.nn.functional.conv2d on the conv-stack convolutions
(channels_last, cuDNN), CUDA events around each call, median of REPS calls after warm-up. Each row
is timed with cuDNN's benchmark mode off (a default eager run) and on (cuDNN times its algorithms
first); torch_ms is the faster of the two, PyTorch's best form, and both are kept
(torch_ms_benchmark_off, torch_ms_benchmark_on). Rows: float32 with the default allow_tf32=True, float32 with
allow_tf32=False (exact), float16, bfloat16; plus float32/bfloat16 NCHW rows for the layout question.
Prints a JSON list to stdout."""
import json, statistics, sys
import torch
import torch.nn.functional as F

REPS = 100
CONVS = [
    # name, x shape, w shape, stride, padding, bias
    ("stem 3->64 7x7 s2", [16, 3, 224, 224], [64, 3, 7, 7], 2, 3, True),
    ("body 64->64 3x3", [16, 64, 112, 112], [64, 64, 3, 3], 1, 1, True),
]
MODES = [("float32", True), ("float32", False), ("float16", True), ("bfloat16", True)]

def time_ms(fn):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)

rows = []
g = torch.Generator(device="cuda").manual_seed(0)
for layout in ("nhwc", "nchw"):
    for name, xs, ws, st, pad, bias in CONVS:
        for dtype, tf32 in MODES:
            if layout == "nchw" and (tf32 is False or dtype == "float16"):
                continue
            torch.backends.cudnn.allow_tf32 = tf32
            dt = getattr(torch, dtype)
            x = torch.randn(xs, device="cuda", generator=g).to(dt)
            w = (torch.randn(ws, device="cuda", generator=g) * 0.05).to(dt)
            b = torch.randn(ws[0], device="cuda", generator=g).to(dt) if bias else None
            if layout == "nhwc":
                x = x.contiguous(memory_format=torch.channels_last)
                w = w.contiguous(memory_format=torch.channels_last)
            by = {}
            for bench in (False, True):
                torch.backends.cudnn.benchmark = bench
                by[bench] = time_ms(lambda: F.conv2d(x, w, b, st, pad))
            torch.backends.cudnn.benchmark = False
            rows.append({"conv": name, "layout": layout, "dtype": dtype, "tf32": tf32 if dtype == "float32" else None,
                         "torch_ms": min(by.values()), "torch_ms_benchmark_off": by[False], "torch_ms_benchmark_on": by[True]})
torch.backends.cudnn.allow_tf32 = True
json.dump(rows, sys.stdout)
