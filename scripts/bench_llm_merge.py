#!/usr/bin/env python3
"""Joins the two sides of the LLM library benchmark into rows {op, variant, shape, dtype,
torch_impl, torch_ms, kiln_ms, speedup, gbps, copy_gbps, copy_fraction} and prints a compact table
with issue #6's lines checked.

gbps is Kiln's achieved bandwidth. For the norms, copy_gbps is the same run's torch copy_ of the
very bytes the row moves (scripts/bench_llm_pytorch.py "copies"), timed the same way, and
copy_fraction = gbps / copy_gbps; copy_fraction_1gib compares with the 1 GiB copy_ instead. With
--moe, the rows of dist/bench/llm-moe-cuda.js's merged file (MoE routing, fused MoE, mHC, and the
core topk / sort rows it also times) are appended, so one file holds the whole #6 table.

    python3 scripts/bench_llm_merge.py torch.json kiln.json out.json [--moe moe.json] [--command "..."]

The checks (issue #6): every library op >= 1x each PyTorch reference; llm.rmsNorm and
llm.fusedAddRmsNorm >= 2x forward_native and >= 80% of copy bandwidth at large sizes (16384 rows);
llm.rotaryEmbedding >= 3x. Core ops (topk, sort) are listed but are not #6 library ops.
"""
import datetime
import json
import sys

argv = sys.argv[1:]


def opt(name):
    if name in argv:
        i = argv.index(name)
        v = argv[i + 1]
        del argv[i:i + 2]
        return v
    return None


moe_path, command = opt("--moe"), opt("--command")
t, k, out = (json.load(open(argv[0])), json.load(open(argv[1])), argv[2])
kiln = {(r["op"], r["variant"], tuple(r["shape"]), r["dtype"]): r for r in k["rows"]}
copy_gbps = t["copy"]["gbps"]
copies = t.get("copies", {})
NORMS = ("llm.rmsNorm", "llm.fusedAddRmsNorm")
rows = []
for r in t["rows"]:
    m = kiln.get((r["op"], r["variant"], tuple(r["shape"]), r["dtype"]))
    if m is None:
        continue
    row = {
        "op": r["op"], "variant": r["variant"], "shape": r["shape"], "dtype": r["dtype"], "torch_impl": r["torch_impl"],
        "torch_ms": round(r["torch_ms"], 5), "kiln_ms": round(m["kiln_ms"], 5), "speedup": round(r["torch_ms"] / m["kiln_ms"], 3),
        "gbps": round(m["gbps"], 1), "copy_fraction_1gib": round(m["gbps"] / copy_gbps, 3),
    }
    # The op moves m["bytes"]: a copy_ of half of them (read + write) moves the same.
    same = copies.get(str(m["bytes"] // 2))
    if r["op"] in NORMS and same:
        row["copy_gbps"] = round(same["gbps"], 1)
        row["copy_fraction"] = round(m["gbps"] / same["gbps"], 3)
    rows.append(row)
moe_rows = json.load(open(moe_path)) if moe_path else []
moe_rows = moe_rows if isinstance(moe_rows, list) else moe_rows.get("rows", [])
for r in moe_rows:
    rows.append({key: r[key] for key in ("op", "shape", "dtype", "torch_impl", "torch_ms", "kiln_ms", "speedup", "gbps") if key in r} | {"variant": r.get("variant", "")})


def check(r):
    """'' when the row meets its #6 line, else what it misses."""
    miss = []
    if not r["op"].startswith("llm."):
        return "(core op)"
    if r["speedup"] < 1:
        miss.append("<1x")
    if r["op"] in NORMS and r["torch_impl"] == "forward_native" and r["speedup"] < 2:
        miss.append("<2x native")
    if r["op"] in NORMS and r["shape"][0] >= 16384 and r.get("copy_fraction", 1) < 0.8:
        miss.append("<80% copy")
    if r["op"] == "llm.rotaryEmbedding" and r["speedup"] < 3:
        miss.append("<3x")
    return " ".join(miss)


for r in rows:
    r["check"] = check(r) or "ok"
meta = {
    "machine": t["meta"].get("device"),
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "command": command,
    "torch": t["meta"], "kiln": k["meta"],
    "copy": {"torch_copy_1gib_gbps": round(copy_gbps, 1), "kiln_clone_1gib_gbps": round(k["copy"]["gbps"], 1),
             "torch_copy_same_bytes": {b: round(c["gbps"], 1) for b, c in copies.items()}},
}
json.dump({"meta": meta, "rows": rows}, open(out, "w"), indent=1)
print(f"copy bandwidth (1 GiB, read + write): torch copy_ {copy_gbps:.0f} GB/s, kiln clone {k['copy']['gbps']:.0f} GB/s")
print(f"{'op':20s} {'var':5s} {'impl':16s} {'shape':34s} {'dtype':9s} {'torch_ms':>9s} {'kiln_ms':>9s} {'speedup':>8s} {'GB/s':>6s} {'copy%':>6s}  check")
for r in rows:
    cf = f"{100 * r['copy_fraction']:5.0f}%" if "copy_fraction" in r else "     -"
    print(f"{r['op']:20s} {r['variant']:5s} {r['torch_impl'][:16]:16s} {str(r['shape'])[:34]:34s} {r['dtype']:9s} {r['torch_ms']:9.4f} {r['kiln_ms']:9.4f} {r['speedup']:8.2f} {r['gbps']:6.0f} {cf}  {r['check']}")
bad = [r for r in rows if r["check"] not in ("ok", "(core op)")]
print(f"{len(rows)} rows, {len(bad)} below their #6 line" + "".join(f"\n  BELOW: {r['op']} {r['variant']} {r['torch_impl']} {r['shape']} {r['dtype']} {r['check']}" for r in bad))
