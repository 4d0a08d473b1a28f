#!/usr/bin/env python3
"""Merges the rounds of scripts/device/ab-bench.sh (files ab-<round>-<old|new>.json in one folder):
per (workload, dtype) the median eager and compiled ms of each build over its rounds, and new/old.
Writes ab-merged.json beside them and prints a table; exits 1 when a row is missing on either side."""
import glob, json, os, re, statistics, sys

folder = sys.argv[1]
rows, metas = {}, {}
for f in sorted(glob.glob(os.path.join(folder, 'ab-*-*.json'))):
    m = re.search(r'ab-(\d+)-(old|new)\.json$', f)
    if not m or f.endswith('ab-merged.json'):
        continue
    side = m.group(2)
    d = json.load(open(f))
    metas.setdefault(side, d['meta'])
    for r in d['results']:
        k = (r['workload'], r['dtype'])
        rows.setdefault(k, {'old': {'eager': [], 'compiled': []}, 'new': {'eager': [], 'compiled': []}})
        rows[k][side]['eager'].append(r['eager_ms'])
        rows[k][side]['compiled'].append(r['compiled_ms'])
out, missing = [], []
print(f"{'workload':24} {'dtype':9} {'eager old':>10} {'eager new':>10} {'ratio':>6} {'comp old':>10} {'comp new':>10} {'ratio':>6}")
for (w, dt), v in sorted(rows.items()):
    if not v['old']['compiled'] or not v['new']['compiled']:
        missing.append(f'{w} {dt}')
        continue
    med = {s: {m: statistics.median(v[s][m]) for m in ('eager', 'compiled')} for s in ('old', 'new')}
    re_, rc = med['new']['eager'] / med['old']['eager'], med['new']['compiled'] / med['old']['compiled']
    out.append({'workload': w, 'dtype': dt, 'old': med['old'], 'new': med['new'], 'rounds': {s: len(v[s]['compiled']) for s in ('old', 'new')},
                'eager_new_over_old': re_, 'compiled_new_over_old': rc, 'samples': v})
    print(f"{w:24} {dt:9} {med['old']['eager']:10.4f} {med['new']['eager']:10.4f} {re_:6.3f} {med['old']['compiled']:10.4f} {med['new']['compiled']:10.4f} {rc:6.3f}")
json.dump({'meta': {'old': metas.get('old'), 'new': metas.get('new'), 'command': 'scripts/device/ab-bench.sh'}, 'results': out},
          open(os.path.join(folder, 'ab-merged.json'), 'w'), indent=1)
if missing:
    print('MISSING rows:', ', '.join(missing))
    sys.exit(1)
