#!/usr/bin/env python3
"""Joins scripts/bench_pytorch.py files (one process per workload and mode, as
scripts/cuda-compile-device.sh runs them) into one file of rows per (workload, dtype), each with
every mode's numbers under 'modes' and compiled_ms / compile_mode from the fastest mode.

It fails (exit 1, and writes nothing) when an expected (workload, dtype, mode) has no number, so a
mode that timed out or crashed can never leave a weaker form standing in as "torch.compile".
Expected: every workload, both dtypes and all three modes unless narrowed with --workloads,
--dtypes, --modes (comma-separated).

    python3 scripts/bench_pytorch_merge.py out.json in1.json [in2.json ...] [--modes default,reduce-overhead,max-autotune]
    python3 scripts/bench_pytorch_merge.py --self-check     # the merge on made-up rows, incl. a missing one
"""
import json
import statistics
import sys

MODES = ['default', 'reduce-overhead', 'max-autotune']
WORKLOADS = ['elementwise-4096', 'elementwise-1024', 'mlp-2048x4096', 'mlp-64x512', 'transformer-block',
             'conv-stack', 'qwen3-0.6b-forward']
DTYPES = ['float32', 'bfloat16']


def merge(docs, workloads, dtypes, modes):
    """Returns (merged doc, missing list). Several eager numbers of one row (one per process): median."""
    by = {}
    meta = None
    for d in docs:
        meta = meta or d.get('meta', {})
        for r in d['results']:
            k = (r['workload'], r['dtype'])
            e = by.setdefault(k, {'eager': [], 'modes': {}})
            e['eager'].append(r['eager_ms'])
            # Older files (one mode per row, no 'modes'): the row's own mode.
            ms = r.get('modes') or ({r.get('compile_mode', 'default'): {k2: r[k2] for k2 in ('compiled_ms', 'compile_s', 'max_abs_diff')}}
                                    if r.get('compiled_ms') is not None else {})
            for m, v in ms.items():
                old = e['modes'].get(m)
                if old is None or 'error' in old:
                    e['modes'][m] = v
    missing, rows = [], []
    for w in workloads:
        for dt in dtypes:
            e = by.get((w, dt))
            for m in modes:
                v = e and e['modes'].get(m)
                if not v or 'error' in v:
                    missing.append(f'{w} {dt} {m}' + (f" ({v['error']})" if v else ''))
            if not e:
                continue
            ok = {m: v for m, v in e['modes'].items() if 'error' not in v}
            best = min(ok, key=lambda m: ok[m]['compiled_ms']) if ok else None
            eager = statistics.median(e['eager'])
            b = ok.get(best, {})
            rows.append(dict(framework='pytorch', workload=w, device='cuda', dtype=dt, eager_ms=round(eager, 4),
                             compiled_ms=b.get('compiled_ms'), speedup=round(eager / b['compiled_ms'], 3) if b else None,
                             compile_s=b.get('compile_s'), max_abs_diff=b.get('max_abs_diff'), compile_mode=best,
                             modes=e['modes'], modes_missing=sorted(m for m in modes if m not in ok)))
    meta = dict(meta or {}, command='scripts/bench_pytorch.py, one process per workload and mode; scripts/bench_pytorch_merge.py',
                modes=modes)
    return {'meta': meta, 'results': rows}, missing


def self_check():
    row = lambda w, m, ms: {'workload': w, 'dtype': 'float32', 'eager_ms': 1.0, 'modes': {m: {'compiled_ms': ms, 'compile_s': 1, 'max_abs_diff': 0}}}
    docs = [{'meta': {}, 'results': [row('mlp-64x512', 'default', 0.5)]},
            {'meta': {}, 'results': [row('mlp-64x512', 'reduce-overhead', 0.2)]},
            {'meta': {}, 'results': [row('mlp-64x512', 'max-autotune', 0.3)]}]
    out, missing = merge(docs, ['mlp-64x512'], ['float32'], MODES)
    assert missing == [], missing
    assert out['results'][0]['compile_mode'] == 'reduce-overhead' and out['results'][0]['compiled_ms'] == 0.2
    _, missing = merge(docs[:2], ['mlp-64x512'], ['float32'], MODES)
    assert missing == ['mlp-64x512 float32 max-autotune'], missing
    failed = [{'meta': {}, 'results': [{**row('mlp-64x512', 'max-autotune', 0), 'modes': {'max-autotune': {'error': 'timeout'}}}]}]
    _, missing = merge(docs[:2] + failed, ['mlp-64x512'], ['float32'], MODES)
    assert missing == ['mlp-64x512 float32 max-autotune (timeout)'], missing
    _, missing = merge(docs, ['mlp-64x512', 'conv-stack'], ['float32'], MODES)
    assert len(missing) == 3 and all(m.startswith('conv-stack') for m in missing), missing
    print('bench_pytorch_merge self-check: ok')


def main(argv):
    if argv == ['--self-check']:
        self_check()
        return 0
    opts = {'--modes': MODES, '--workloads': WORKLOADS, '--dtypes': DTYPES}
    for name in list(opts):
        if name in argv:
            i = argv.index(name)
            opts[name] = argv[i + 1].split(',')
            del argv[i:i + 2]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, files = argv[0], argv[1:]
    merged, missing = merge([json.load(open(f)) for f in files], opts['--workloads'], opts['--dtypes'], opts['--modes'])
    for r in merged['results']:
        print(f"{r['workload']:22s} {r['dtype']:9s} eager {r['eager_ms']:8.3f}  best {r['compile_mode']} {r['compiled_ms']}  "
              + '  '.join(f"{m} {v.get('compiled_ms', 'ERR')}" for m, v in sorted(r['modes'].items())))
    if missing:
        print(f'MISSING {len(missing)} (workload, dtype, mode): ' + '; '.join(missing), file=sys.stderr)
        return 1
    json.dump(merged, open(out, 'w'), indent=1)
    print(f'wrote {out}: {len(merged["results"])} rows, modes {", ".join(opts["--modes"])}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
