#!/usr/bin/env python3
"""PyTorch side of the benchmark: the workloads of src/bench/workloads.ts, eager vs torch.compile
in each of its modes (default, reduce-overhead = CUDA graphs, max-autotune), so Kiln is compared
with PyTorch's best form, not with whichever mode happened to be measured.

Run on the device machine in the same call as `kiln bench --device cuda`, so both sides see the
same GPU, clocks and driver. Writes JSON of the same shape as `kiln bench --json`:
{"meta": {...}, "results": [{framework: "pytorch", workload, device, dtype, eager_ms, compiled_ms,
speedup, compile_s, max_abs_diff, compile_mode, modes: {mode: {compiled_ms, compile_s,
max_abs_diff} | {error}}, modes_missing}]}. compiled_ms / compile_mode are the fastest mode that
ran; modes_missing lists requested modes that failed (a row with any is not a best-form number).

Timing: CUDA events around each rep, median of `--reps` after warm-up (the guide's figures used 50).
The definitions mirror src/bench/workloads.ts (same shapes, same ops); weights are seeded randoms
drawn by torch, not Kiln's (max_abs_diff is torch.compile vs torch eager, within PyTorch).
A mode's compile_s is its first call; CUDA graph recording happens in the warm-up calls after it.

    python3 scripts/bench_pytorch.py --json out.json [--workload W ...] [--dtype float32 bfloat16]
        [--modes default reduce-overhead max-autotune]

One mode per process (as scripts/cuda-compile-device.sh runs it, under a time limit each) and
scripts/bench_pytorch_merge.py joins the files and fails when a (workload, dtype, mode) is missing.
"""
import argparse
import datetime
import json
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def elementwise(x):
    y = x * 1.5 + 0.5
    y = torch.relu(y) * torch.sigmoid(x)
    y = y + torch.tanh(x * 0.5)
    y = y - torch.exp(-x * x) * 0.1
    return y * 2 - 1


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, hidden)

    def forward(self, x):
        B, T, C = x.shape
        H = self.heads
        qkv = self.qkv(self.ln1(x)).view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        h = x + self.proj(o.transpose(1, 2).reshape(B, T, C))
        return h + self.mlp(self.ln2(h))


class ConvStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.bn1 = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.copy_(torch.randn(64) * 0.1)
                bn.running_var.copy_(torch.rand(64) + 0.5)
                bn.weight.copy_(torch.rand(64) + 0.5)
                bn.bias.copy_(torch.randn(64) * 0.1)

    def forward(self, x):
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


def build(name, dtype):
    """Returns (fn, inputs) on cuda in `dtype`, weights drawn in float32 from seed 0."""
    torch.manual_seed(0)
    dev = 'cuda'
    if name.startswith('elementwise-'):
        n = int(name.split('-')[1])
        return elementwise, [torch.randn(n, n).to(dev, dtype)]
    if name == 'mlp-2048x4096':
        m = Mlp(4096, 4096).eval().to(dev, dtype)
        return m, [torch.randn(2048, 4096).to(dev, dtype)]
    if name == 'mlp-64x512':
        m = Mlp(512, 512).eval().to(dev, dtype)
        return m, [torch.randn(64, 512).to(dev, dtype)]
    if name == 'transformer-block':
        m = Block(1024, 16, 4096).eval().to(dev, dtype)
        return m, [torch.randn(8, 512, 1024).to(dev, dtype)]
    if name == 'conv-stack':
        m = ConvStack().eval().to(dev, dtype).to(memory_format=torch.channels_last)
        x = torch.randn(16, 3, 224, 224).to(dev, dtype).contiguous(memory_format=torch.channels_last)
        return m, [x]
    if name == 'qwen3-0.6b-forward':
        from transformers import Qwen3Config, Qwen3ForCausalLM
        cfg = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=128, rope_theta=1e6,
                          rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=4096)
        m = Qwen3ForCausalLM(cfg).eval().to(dev, dtype)
        ids = torch.randint(0, cfg.vocab_size, (1, 128), device=dev)
        return (lambda t: m(t, use_cache=False).logits), [ids]
    raise SystemExit(f'unknown workload {name}')


def time_ms(fn, inputs, reps, warmup):
    for _ in range(warmup):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*inputs)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


MODES = ['default', 'reduce-overhead', 'max-autotune']
WORKLOADS = ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block',
             'conv-stack', 'qwen3-0.6b-forward']


def time_mode(fn, inputs, mode, out_e, args):
    """One torch.compile mode: cold first call (compile_s), median time, max |compiled - eager|."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, mode=None if mode == 'default' else mode)
    if mode == 'default':
        step = compiled
    else:
        # reduce-overhead and max-autotune replay CUDA graphs (cudagraph trees): marking each call a
        # new step lets the graph's output buffers be reused, as a serving loop would.
        def step(*xs):
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*xs)
    t0 = time.perf_counter()
    step(*inputs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    compiled_ms = time_ms(step, inputs, args.reps, args.warmup)
    # Cloned at once: the next replay of a CUDA graph overwrites its static outputs.
    out_c = step(*inputs).float().clone()
    diff = (out_c - out_e).abs().max().item()
    return {'compiled_ms': round(compiled_ms, 4), 'compile_s': round(compile_s, 2), 'max_abs_diff': diff}


def best_row(w, dt, eager_ms, modes):
    """The row of the fastest mode that ran; every mode's numbers (or error) under 'modes'."""
    ok = {m: v for m, v in modes.items() if 'error' not in v}
    best = min(ok, key=lambda m: ok[m]['compiled_ms']) if ok else None
    b = ok.get(best, {})
    return dict(framework='pytorch', workload=w, device='cuda', dtype=dt, eager_ms=round(eager_ms, 4),
                compiled_ms=b.get('compiled_ms'), speedup=round(eager_ms / b['compiled_ms'], 3) if b else None,
                compile_s=b.get('compile_s'), max_abs_diff=b.get('max_abs_diff'), compile_mode=best, modes=modes,
                modes_missing=sorted(m for m in modes if m not in ok))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--json', required=True)
    ap.add_argument('--workload', nargs='*', default=WORKLOADS)
    ap.add_argument('--dtype', nargs='*', default=['float32', 'bfloat16'])
    ap.add_argument('--reps', type=int, default=50)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--modes', nargs='*', default=MODES, choices=MODES, help='torch.compile modes, each timed (default: all)')
    args = ap.parse_args()
    rows = []
    for dt in args.dtype:
        dtype = getattr(torch, dt)
        for w in args.workload:
            with torch.inference_mode():
                fn, inputs = build(w, dtype)
                eager_ms = time_ms(fn, inputs, args.reps, args.warmup)
                out_e = fn(*inputs).float().clone()
                modes = {}
                for mode in args.modes:
                    try:
                        modes[mode] = time_mode(fn, inputs, mode, out_e, args)
                    except Exception as e:  # a mode that fails is recorded, and the row says it is missing
                        modes[mode] = {'error': f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'}
                    torch._dynamo.reset()
                    torch.cuda.empty_cache()
                    m = modes[mode]
                    print(f"{w:22s} {dt:9s} {mode:15s} " + (f"error {m['error']}" if 'error' in m else
                          f"compiled {m['compiled_ms']:8.3f} ms  compile {m['compile_s']:6.1f} s  diff {m['max_abs_diff']:.2e}"), flush=True)
            rows.append(best_row(w, dt, eager_ms, modes))
            r = rows[-1]
            print(f"{w:22s} {dt:9s} eager {eager_ms:8.3f} ms  best {r['compile_mode']} {r['compiled_ms']} ms"
                  + (f"  MISSING {r['modes_missing']}" if r['modes_missing'] else ''), flush=True)
            del fn, inputs, out_e
            torch.cuda.empty_cache()
    meta = dict(machine=platform.node(), device=torch.cuda.get_device_name(0), torch=torch.__version__,
                cuda=torch.version.cuda, date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                command=' '.join(sys.argv), reps=args.reps, warmup=args.warmup, timing='CUDA events, median',
                modes=args.modes)
    with open(args.json, 'w') as f:
        json.dump({'meta': meta, 'results': rows}, f, indent=1)


if __name__ == '__main__':
    main()
