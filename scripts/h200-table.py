#!/usr/bin/env python3
"""Side-by-side table of device runs: Kiln's `kiln bench --json` rows and scripts/bench_pytorch_merge.py
rows (framework 'pytorch'), matched on (workload, dtype) within each (kiln, torch) pair, so every row
compares numbers measured in one device call. PyTorch's best form is the fastest of eager and every
torch.compile mode measured (eager can win: small GEMM-bound workloads gain nothing from Inductor);
a row that lacks a mode of default, reduce-overhead and max-autotune says so, since it may then not be
PyTorch's best form. With --json, also writes the joined rows.

    python3 scripts/h200-table.py kiln1.json torch1.json [kiln2.json torch2.json ...] [--json out.json] > table.md
"""
import json
import sys

ALL_MODES = ['default', 'reduce-overhead', 'max-autotune']
ORDER = ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block', 'conv-stack', 'qwen3-0.6b-forward']


def f(x, d=3):
    return '-' if x is None else f'{x:.{d}f}'


def best_form(p):
    """(ms, name) of PyTorch's fastest measured form, eager included."""
    forms = [(p['eager_ms'], 'eager')] + [(v['compiled_ms'], m) for m, v in (p.get('modes') or {}).items() if v.get('compiled_ms') is not None]
    return min(forms)


def join(pairs):
    rows = []
    for kiln_file, torch_file in pairs:
        kiln, torch = json.load(open(kiln_file)), json.load(open(torch_file))
        peer = {(r['workload'], r['dtype']): r for r in torch['results']}
        for r in kiln['results']:
            p = peer.get((r['workload'], r['dtype']))
            if p is None:
                continue
            ms, form = best_form(p)
            missing = [m for m in ALL_MODES if m not in (p.get('modes') or {})]
            rows.append({
                'workload': r['workload'], 'dtype': r['dtype'],
                'kiln_eager_ms': r['eager_ms'], 'kiln_compiled_ms': r['compiled_ms'], 'kiln_compile_s': r.get('compile_s'),
                'kiln_max_abs_diff': r.get('max_abs_diff'),
                'torch_eager_ms': p['eager_ms'], 'torch_modes': p.get('modes'), 'torch_modes_missing': missing,
                'torch_best_ms': ms, 'torch_best_form': form, 'kiln_over_torch_best': r['compiled_ms'] / ms,
                'kiln_meta': kiln['meta'], 'torch_meta': torch['meta'],
            })
    rows.sort(key=lambda r: (r['dtype'] != 'float32', ORDER.index(r['workload']) if r['workload'] in ORDER else 99))
    return rows


def main(argv):
    out = None
    if '--json' in argv:
        i = argv.index('--json')
        out = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = join(list(zip(argv[0::2], argv[1::2])))
    print('| workload | dtype | kiln eager ms | kiln compiled ms | torch eager | torch default | torch reduce-overhead | torch max-autotune | torch best (form) | kiln / torch best |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in rows:
        m = r['torch_modes'] or {}
        cell = lambda k: f(m[k].get('compiled_ms')) if k in m else 'not measured'
        ratio = r['kiln_over_torch_best']
        print(f"| {r['workload']} | {r['dtype']} | {f(r['kiln_eager_ms'])} | {f(r['kiln_compiled_ms'])} | {f(r['torch_eager_ms'])} | "
              f"{cell('default')} | {cell('reduce-overhead')} | {cell('max-autotune')} | {f(r['torch_best_ms'])} ({r['torch_best_form']}) | "
              f"{f(ratio, 2)}{' (faster)' if ratio < 1 else ' (slower)'} |")
    if out:
        json.dump({'rows': rows}, open(out, 'w'), indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
