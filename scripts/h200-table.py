#!/usr/bin/env python3
"""Side-by-side table of one device run: Kiln's `kiln bench --json` rows and scripts/bench_pytorch.py
rows (framework 'pytorch'), matched on (workload, dtype), as Markdown. The torch.compile column is
the fastest mode measured (named beside it); a row whose file lacks a mode of default,
reduce-overhead and max-autotune says so, since it is then not PyTorch's best form.

    python3 scripts/h200-table.py kiln.json pytorch.json > bench/results/h200-....md
"""
import json
import sys

kiln = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
peer = {(r['workload'], r['dtype']): r for r in torch['results']}
order = ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block', 'conv-stack', 'qwen3-0.6b-forward']
rows = sorted(kiln['results'], key=lambda r: (r['dtype'] != 'float32', order.index(r['workload']) if r['workload'] in order else 99))


def f(x, d=3):
    return '-' if x is None else f'{x:.{d}f}'


cmd = kiln['meta'].get('command', 'kiln bench')
cmd = ' '.join(['kiln'] + cmd[cmd.index('bench'):]) if isinstance(cmd, list) and 'bench' in cmd else cmd
dev = kiln['meta'].get('device', {})
name = dev.get('properties', {}).get('name', '') if isinstance(dev, dict) else str(dev)
print(f"Kiln: `{cmd}`; PyTorch: `{torch['meta'].get('command', 'scripts/bench_pytorch.py')}`.")
print(f"Device: {name}; date {kiln['meta'].get('date', '')}. CUDA events, medians.\n")
ALL_MODES = {'default', 'reduce-overhead', 'max-autotune'}


def mode_note(p):
    if not p:
        return ''
    have = {m for m, v in (p.get('modes') or {p.get('compile_mode', 'default'): {}}).items() if 'error' not in v}
    lacking = sorted(ALL_MODES - have)
    return f"{p.get('compile_mode')}" + (f" (not measured: {', '.join(lacking)})" if lacking else '')


print('| workload | dtype | kiln eager ms | kiln compiled ms | torch eager ms | torch.compile ms (best mode) | mode | kiln compiled / torch.compile | kiln compile s | max abs diff |')
print('|---|---|---:|---:|---:|---:|---|---:|---:|---:|')
for r in rows:
    p = peer.get((r['workload'], r['dtype']))
    ratio = (r['compiled_ms'] / p['compiled_ms']) if p and r.get('compiled_ms') and p.get('compiled_ms') else None
    verdict = '' if ratio is None else (' (faster)' if ratio < 1 else ' (slower)')
    print(f"| {r['workload']} | {r['dtype']} | {f(r['eager_ms'])} | {f(r['compiled_ms'])} | {f(p and p['eager_ms'])} | {f(p and p['compiled_ms'])} | {mode_note(p)} | {f(ratio, 2)}{verdict} | {f(r.get('compile_s'), 2)} | {r.get('max_abs_diff', 0):.2e} |")
