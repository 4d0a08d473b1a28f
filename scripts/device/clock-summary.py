#!/usr/bin/env python3
# Clock summary per phase of a device call (scripts/device/s18.sh, s19.sh): the median, least and
# largest SM clock, GPU utilisation and power that nvidia-smi sampled (clocks.csv, every 100 ms)
# while each phase named in phases.txt ran.
#   python3 scripts/device/clock-summary.py OUT_DIR
import sys, datetime, statistics
out = sys.argv[1]
ph = []
for l in open(f'{out}/phases.txt'):
    t, _, name = l.split()
    ph.append((float(t), name))
rows = []
for l in open(f'{out}/clocks.csv'):
    f = [x.strip() for x in l.split(',')]
    try:
        ts = datetime.datetime.strptime(f[0], '%Y/%m/%d %H:%M:%S.%f').timestamp()
        rows.append((ts, int(f[1].split()[0]), int(f[3].split()[0]), float(f[4].split()[0])))
    except Exception:
        pass
for i, (t, name) in enumerate(ph):
    end = ph[i + 1][0] if i + 1 < len(ph) else 1e18
    r = [x for x in rows if t <= x[0] < end]
    if r:
        sm = [x[1] for x in r]; ut = [x[2] for x in r]; pw = [x[3] for x in r]
        print(f'clocks {name}: sm MHz median {statistics.median(sm)} min {min(sm)} max {max(sm)}; util % median {statistics.median(ut)}; power W median {statistics.median(pw)} ({len(r)} samples)')
