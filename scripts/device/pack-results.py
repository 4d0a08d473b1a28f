#!/usr/bin/env python3
"""Packs a device call's part folder (the tarball of scripts/device/sNN.sh PART, extracted) into one
bench/results JSON: {"meta": {machine, date, commit, command, label}, "results": [{source_file,
data}] for every JSON file, "logs": {name: text} for every .txt file (clocks.csv left out).

  python3 scripts/device/pack-results.py DIR OUT.json --commit C --command "..." --label "..." [--date D]
"""
import argparse, json, os, datetime

ap = argparse.ArgumentParser()
ap.add_argument('dir'); ap.add_argument('out')
ap.add_argument('--commit', required=True); ap.add_argument('--command', required=True); ap.add_argument('--label', required=True)
ap.add_argument('--date', default=datetime.date.today().isoformat())
a = ap.parse_args()
gpu = open(os.path.join(a.dir, 'gpu.txt')).read().strip() if os.path.exists(os.path.join(a.dir, 'gpu.txt')) else 'unknown'
cpu = ''
lscpu = os.path.join(a.dir, 'lscpu.txt')
if os.path.exists(lscpu):
    for line in open(lscpu):
        if line.startswith('Model name:'): cpu = line.split(':', 1)[1].strip()
meta = {'machine': f'device machine ({gpu}{"; " + cpu if cpu else ""})', 'date': a.date, 'commit': a.commit, 'command': a.command, 'label': a.label}
results, logs = [], {}
for name in sorted(os.listdir(a.dir)):
    path = os.path.join(a.dir, name)
    if name.endswith('.json'):
        results.append({'source_file': name, 'data': json.load(open(path))})
    elif name.endswith('.txt') and name != 'lscpu.txt':
        logs[name] = open(path).read()
json.dump({'meta': meta, 'results': results, 'logs': logs}, open(a.out, 'w'), indent=1)
print(f'{a.out}: {len(results)} result files, {len(logs)} logs')
