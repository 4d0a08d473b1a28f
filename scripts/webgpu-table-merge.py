#!/usr/bin/env python3
"""Merges one device call of scripts/device/webgpu-table.sh (and, optionally, the matmul rows of
scripts/bench-webgpu-matmul.mjs as JSON lines) into issue #20's table: per workload and dtype, Kiln
webgpu eager / compiled next to Kiln cuda and PyTorch eager from the same call, with the ratio
webgpu compiled / cuda compiled (the issue's goal: <= 2). Writes {"meta", "results", "table"} JSON
and prints the table as Markdown.

    python3 scripts/webgpu-table-merge.py WT_DIR OUT.json [--matmul rows.jsonl] [--commit SHA]
"""
import argparse
import json
import os


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('wt_dir')
    ap.add_argument('out')
    ap.add_argument('--matmul')
    ap.add_argument('--commit')
    a = ap.parse_args()
    p = lambda name: os.path.join(a.wt_dir, name)
    webgpu = load(p('kiln-webgpu.json'))
    cuda = load(p('kiln-cuda.json'))
    torch = load(p('pytorch-eager.json')) if os.path.exists(p('pytorch-eager.json')) else {'results': [], 'meta': {}}
    decode = load(p('kiln-decode-webgpu.json')) if os.path.exists(p('kiln-decode-webgpu.json')) else {'results': [], 'meta': {}}
    key = lambda r: (r['workload'], r['dtype'])
    by_cuda = {key(r): r for r in cuda['results']}
    by_torch = {key(r): r for r in torch['results']}
    table = []
    for r in webgpu['results']:
        c, t = by_cuda.get(key(r)), by_torch.get(key(r))
        row = dict(workload=r['workload'], dtype=r['dtype'], webgpu_eager_ms=r['eager_ms'], webgpu_compiled_ms=r['compiled_ms'],
                   cuda_eager_ms=c and c['eager_ms'], cuda_compiled_ms=c and c['compiled_ms'], pytorch_eager_ms=t and t['eager_ms'])
        if c and r['compiled_ms'] and c['compiled_ms']:
            row['webgpu_over_cuda'] = round(r['compiled_ms'] / c['compiled_ms'], 2)
            row['within_2x'] = row['webgpu_over_cuda'] <= 2
        table.append(row)
    matmul = []
    if a.matmul:
        with open(a.matmul) as f:
            matmul = [json.loads(line) for line in f if line.strip().startswith('{')]
    host = open(p('host-webgpu.txt')).read().strip().splitlines() if os.path.exists(p('host-webgpu.txt')) else []
    # The GPU as nvidia-smi named it (smi.txt: a header line, then name, driver, clocks), else the H200 the machine mostly has.
    gpu = 'H200'
    if os.path.exists(p('smi.txt')):
        lines = [l for l in open(p('smi.txt')).read().splitlines() if l.strip() and not l.startswith('name')]
        if lines: gpu = lines[0].split(',')[0].strip()
    meta = dict(machine=f'{gpu} device machine (Dawn/Vulkan for webgpu, CUDA 13 for cuda, PyTorch 2.11)',
                date=webgpu['meta'].get('date') or decode['meta'].get('date'), commit=a.commit,
                command='bash .device/run.sh bash scripts/device/webgpu-table.sh; python3 scripts/webgpu-table-merge.py',
                kiln_webgpu_meta=webgpu['meta'], kiln_cuda_meta=cuda['meta'], pytorch_meta=torch['meta'], decode_meta=decode['meta'],
                timing='kiln bench: device time (Events), median of reps; PyTorch: CUDA events, median')
    rows = webgpu['results'] + cuda['results'] + torch['results'] + decode['results'] + matmul
    with open(a.out, 'w') as f:
        json.dump(dict(meta=meta, results=rows, table=table, host_overhead_webgpu=[h for h in host if ' us' in h]), f, indent=1)
    print('| workload | dtype | webgpu eager | webgpu compiled | cuda compiled | PyTorch eager | webgpu / cuda |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    fmt = lambda x: '-' if x is None else f'{x:.3f}'
    for t in table:
        print(f"| {t['workload']} | {t['dtype']} | {fmt(t['webgpu_eager_ms'])} | {fmt(t['webgpu_compiled_ms'])} | {fmt(t['cuda_compiled_ms'])} | {fmt(t['pytorch_eager_ms'])} | {t.get('webgpu_over_cuda', '-')} |")
    for m in matmul:
        print(f"matmul {m['dtype']} {m['m']}x{m['n']}x{m['k']}: {m['tflops']} TFLOP/s ({m.get('kernel')})")
    for d in decode['results']:
        if d.get('workload') == 'decode':
            print(f"decode webgpu {d['dtype']} batch {d['batch']}: {d['decode_tok_s']} tok/s ({d.get('decode_path')})")


if __name__ == '__main__':
    main()
