#!/usr/bin/env python3
"""Joins the two sides of the LLM library benchmark into rows {op, variant, shape, dtype,
torch_impl, torch_ms, kiln_ms, speedup, gbps, copy_fraction} (gbps: Kiln's achieved bandwidth;
copy_fraction: gbps over the same run's torch copy_ bandwidth) and prints a compact table.

    python3 scripts/bench_llm_merge.py torch.json kiln.json out.json
"""
import json
import sys

t, k, out = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
kiln = {(r["op"], r["variant"], tuple(r["shape"]), r["dtype"]): r for r in k["rows"]}
copy_gbps = t["copy"]["gbps"]
rows = []
for r in t["rows"]:
    m = kiln.get((r["op"], r["variant"], tuple(r["shape"]), r["dtype"]))
    if m is None:
        continue
    rows.append({
        "op": r["op"], "variant": r["variant"], "shape": r["shape"], "dtype": r["dtype"], "torch_impl": r["torch_impl"],
        "torch_ms": round(r["torch_ms"], 5), "kiln_ms": round(m["kiln_ms"], 5), "speedup": round(r["torch_ms"] / m["kiln_ms"], 3),
        "gbps": round(m["gbps"], 1), "copy_fraction": round(m["gbps"] / copy_gbps, 3),
    })
meta = {"torch": t["meta"], "kiln": k["meta"], "copy": {"torch_copy_gbps": round(copy_gbps, 1), "kiln_clone_gbps": round(k["copy"]["gbps"], 1)}}
json.dump({"meta": meta, "rows": rows}, open(out, "w"), indent=1)
print(f"copy bandwidth (1 GiB, read + write): torch copy_ {copy_gbps:.0f} GB/s, kiln clone {k['copy']['gbps']:.0f} GB/s")
print(f"{'op':20s} {'var':5s} {'impl':14s} {'shape':18s} {'dtype':9s} {'torch_ms':>9s} {'kiln_ms':>9s} {'speedup':>8s} {'GB/s':>6s} {'copy%':>6s}")
for r in rows:
    print(f"{r['op']:20s} {r['variant']:5s} {r['torch_impl']:14s} {str(r['shape']):18s} {r['dtype']:9s} {r['torch_ms']:9.4f} {r['kiln_ms']:9.4f} {r['speedup']:8.2f} {r['gbps']:6.0f} {100 * r['copy_fraction']:5.0f}%")
