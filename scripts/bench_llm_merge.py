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
Each Kiln row is also set against the fastest PyTorch form of its (op, variant, shape, dtype)
(forward_native, torch.compile in each mode, F.rms_norm ...): "best" in the output.

Missing rows fail the merge (exit 1; the file is still written, with meta.missing): a PyTorch row
with no Kiln row, a Kiln row with no PyTorch row, a shape lacking a PyTorch form that other shapes
of its op have or that the PyTorch file's meta.compile_modes asks for, a MoE row without both
times. `python3 scripts/bench_llm_merge.py --self-check` runs the checks on made-up rows.
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


def missing_rows(t, k, moe_rows):
    """What is missing for a complete comparison (see the header)."""
    key = lambda r: (r["op"], r["variant"], tuple(r["shape"]), r["dtype"])
    kiln_keys = {key(r) for r in k["rows"]}
    torch_keys = {key(r) for r in t["rows"]}
    missing = [f"kiln: {' '.join(map(str, c))}" for c in sorted(torch_keys - kiln_keys, key=str)]
    missing += [f"torch: {' '.join(map(str, c))}" for c in sorted(kiln_keys - torch_keys, key=str)]
    forms = {}
    for r in t["rows"]:
        forms.setdefault(r["op"], set()).add(r["torch_impl"])
    modes = {f"compile:{m}" for m in t.get("meta", {}).get("compile_modes", [])}
    have = {}
    for r in t["rows"]:
        have.setdefault(key(r), set()).add(r["torch_impl"])
    for c in sorted(kiln_keys | torch_keys, key=str):
        lack = (forms.get(c[0], set()) | modes) - have.get(c, set())
        if c in torch_keys and lack:
            missing.append(f"torch form {', '.join(sorted(lack))}: {' '.join(map(str, c))}")
    for r in moe_rows:
        if r.get("torch_ms") is None or r.get("kiln_ms") is None:
            missing.append(f"moe: {r.get('op')} {r.get('shape')} {r.get('dtype')} (torch_ms {r.get('torch_ms')}, kiln_ms {r.get('kiln_ms')})")
    return missing


def self_check():
    tr = lambda op, impl, ms, n=16: {"op": op, "variant": "", "shape": [n, 4096], "dtype": "float32", "torch_impl": impl, "torch_ms": ms}
    kr = lambda op, n=16: {"op": op, "variant": "", "shape": [n, 4096], "dtype": "float32", "kiln_ms": 0.01, "gbps": 1, "bytes": 8}
    meta = {"compile_modes": ["default"]}
    t = {"meta": meta, "rows": [tr("llm.rmsNorm", "forward_native", 0.05), tr("llm.rmsNorm", "compile:default", 0.02), tr("llm.rmsNorm", "F.rms_norm", 0.03)]}
    assert missing_rows(t, {"rows": [kr("llm.rmsNorm")]}, []) == []
    assert missing_rows(t, {"rows": []}, []) == ["kiln: llm.rmsNorm  (16, 4096) float32"]
    assert missing_rows(t, {"rows": [kr("llm.rmsNorm"), kr("llm.rmsNorm", 1)]}, []) == ["torch: llm.rmsNorm  (1, 4096) float32"]
    t2 = {"meta": meta, "rows": t["rows"] + [tr("llm.rmsNorm", "forward_native", 0.05, 1)]}
    got = missing_rows(t2, {"rows": [kr("llm.rmsNorm"), kr("llm.rmsNorm", 1)]}, [])
    assert got == ["torch form F.rms_norm, compile:default: llm.rmsNorm  (1, 4096) float32"], got
    assert missing_rows(t, {"rows": [kr("llm.rmsNorm")]}, [{"op": "llm.moeSum", "torch_ms": 1.0}])[0].startswith("moe: llm.moeSum")
    print("bench_llm_merge self-check: ok")


if argv == ["--self-check"]:
    self_check()
    sys.exit(0)
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
missing = missing_rows(t, k, moe_rows)
# Each Kiln row against the fastest PyTorch form of its key.
best = {}
for r in rows:
    c = (r["op"], r["variant"], str(r["shape"]), r["dtype"])
    if r.get("torch_ms") is not None and r.get("kiln_ms") and (c not in best or r["torch_ms"] < best[c]["best_torch_ms"]):
        best[c] = {"op": r["op"], "variant": r["variant"], "shape": r["shape"], "dtype": r["dtype"], "best_torch_impl": r["torch_impl"],
                   "best_torch_ms": r["torch_ms"], "kiln_ms": r["kiln_ms"], "speedup_vs_best": round(r["torch_ms"] / r["kiln_ms"], 3)}
best = list(best.values())


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
    "torch": t["meta"], "kiln": k["meta"], "missing": missing, "complete": not missing,
    "copy": {"torch_copy_1gib_gbps": round(copy_gbps, 1), "kiln_clone_1gib_gbps": round(k["copy"]["gbps"], 1),
             "torch_copy_same_bytes": {b: round(c["gbps"], 1) for b, c in copies.items()}},
}
json.dump({"meta": meta, "rows": rows, "best": best}, open(out, "w"), indent=1)
print(f"copy bandwidth (1 GiB, read + write): torch copy_ {copy_gbps:.0f} GB/s, kiln clone {k['copy']['gbps']:.0f} GB/s")
print(f"{'op':20s} {'var':5s} {'impl':16s} {'shape':34s} {'dtype':9s} {'torch_ms':>9s} {'kiln_ms':>9s} {'speedup':>8s} {'GB/s':>6s} {'copy%':>6s}  check")
for r in rows:
    cf = f"{100 * r['copy_fraction']:5.0f}%" if "copy_fraction" in r else "     -"
    print(f"{r['op']:20s} {r['variant']:5s} {r['torch_impl'][:16]:16s} {str(r['shape'])[:34]:34s} {r['dtype']:9s} {r['torch_ms']:9.4f} {r['kiln_ms']:9.4f} {r['speedup']:8.2f} {r['gbps']:6.0f} {cf}  {r['check']}")
bad = [r for r in rows if r["check"] not in ("ok", "(core op)")]
print(f"{len(rows)} rows, {len(bad)} below their #6 line" + "".join(f"\n  BELOW: {r['op']} {r['variant']} {r['torch_impl']} {r['shape']} {r['dtype']} {r['check']}" for r in bad))
below_best = sorted((b for b in best if b["speedup_vs_best"] < 1), key=lambda b: b["speedup_vs_best"])
lowest = min(best, key=lambda b: b["speedup_vs_best"]) if best else None
print(f"against the fastest PyTorch form of each of {len(best)} keys: {len(below_best)} below 1x"
      + (f"; lowest {lowest['op']} {lowest['variant']} {lowest['shape']} {lowest['dtype']} {lowest['speedup_vs_best']}x vs {lowest['best_torch_impl']}" if lowest else "")
      + "".join(f"\n  SLOWER: {b['op']} {b['variant']} {b['shape']} {b['dtype']} {b['speedup_vs_best']}x vs {b['best_torch_impl']}" for b in below_best))
if missing:
    print(f"MISSING {len(missing)}:\n  " + "\n  ".join(missing), file=sys.stderr)
    sys.exit(1)
