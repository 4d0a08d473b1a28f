#!/usr/bin/env python3
"""PyTorch side of the MoE / mHC / sort benchmark (Kiln side: bench/llm-moe-cuda.ts).

Defines the cases (the Kiln runner reads them from this script's JSON, so both sides time the same
shapes) and times PyTorch references written as vLLM's forward_native / torch composites write them:
  llm.topkSoftmax   torch.softmax(float32) + torch.topk (+ renormalise)      (vLLM fused_topk native)
  llm.groupedTopk   vLLM's python grouped_topk (sigmoid/softmax, correction bias, group mask)
  llm.moeSum        x.sum(dim=1)
  llm.fusedMoe      loop over experts: mask -> nonzero -> gather -> w13 GEMM -> silu*up -> w2 GEMM
                    -> weighted index_add_ (vLLM's torch_moe-style reference)
  llm.mhcPre/Post/HeadCollapse  torch composites of the math in src/ops/defs/llm-mhc.ts
  topk / sort       torch.topk / torch.sort
CUDA events around each call, median of REPS after WARMUP calls.
Each case is also timed as torch.compile(reference, dynamic=False) in each of --compile-modes
(default: default reduce-overhead max-autotune; 'none' for the references alone), as more rows of
the same case with torch_impl "compile:<mode>" (the Kiln runner times every row it is given, and
scripts/bench_llm_merge.py quotes Kiln against the fastest form); a form that fails to compile is
printed and left out. topk / sort (single torch ops) have no compiled rows.
  python3 scripts/bench_llm_moe_pytorch.py out.json [--quick] [--compile-modes default reduce-overhead max-autotune | none]
"""
import json
import sys

import time

import torch

WARMUP = 5
REPS = 50

DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cases(quick):
    out = []
    dts = ["float32", "bfloat16"]
    for dt in dts:
        for t, e, k in ([(1, 128, 8), (256, 128, 8), (4096, 128, 8), (4096, 256, 8), (1024, 64, 2)] if not quick else [(4096, 128, 8)]):
            out.append({"op": "llm.topkSoftmax", "dtype": dt, "p": {"T": t, "E": e, "k": k, "renorm": True}})
        for t in ([1, 256, 4096] if not quick else [4096]):
            out.append({"op": "llm.groupedTopk", "dtype": dt, "p": {"T": t, "E": 256, "k": 8, "groups": 8, "topkGroup": 4, "sigmoid": True, "bias": True, "scale": 2.5}})
        for t in ([1, 64, 1024] if not quick else [1024]):
            out.append({"op": "llm.moeSum", "dtype": dt, "p": {"T": t, "k": 8, "H": 4096}})
        for t in ([16, 512] if not quick else [512]):
            out.append({"op": "llm.fusedMoe", "dtype": dt, "p": {"T": t, "H": 2048, "I": 1024, "E": 8, "k": 2}})
        for t in ([1, 1024] if not quick else [1024]):
            out.append({"op": "llm.mhcPre", "dtype": dt, "p": {"T": t, "n": 4, "H": 4096}})
            out.append({"op": "llm.mhcPost", "dtype": dt, "p": {"T": t, "n": 4, "H": 4096}})
            out.append({"op": "llm.mhcHeadCollapse", "dtype": dt, "p": {"T": t, "n": 4, "H": 4096}})
        out.append({"op": "topk", "dtype": dt, "p": {"rows": 4096, "R": 256, "k": 8}})
        if not quick:
            out.append({"op": "topk", "dtype": dt, "p": {"rows": 32, "R": 151936, "k": 50}})
        out.append({"op": "sort", "dtype": dt, "p": {"rows": 256, "R": 4096}})
    # Op-major order (stable): a run cut short at its time limit still has both dtypes of the first ops.
    order = list(dict.fromkeys(c["op"] for c in out))
    return sorted(out, key=lambda c: order.index(c["op"]))


def grouped_topk(gating, topk, renormalize, num_expert_group, topk_group, scoring_func, bias, scale):
    # vLLM model_executor/layers/fused_moe/fused_moe.py grouped_topk (python reference)
    scores = torch.softmax(gating, dim=-1) if scoring_func == "softmax" else gating.sigmoid()
    num_token = scores.shape[0]
    if bias is not None:
        original_scores = scores
        scores = scores + bias.unsqueeze(0)
        group_scores = scores.view(num_token, num_expert_group, -1).topk(2, dim=-1)[0].sum(dim=-1)
    else:
        group_scores = scores.view(num_token, num_expert_group, -1).max(dim=-1).values
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(num_token, num_expert_group, scores.shape[-1] // num_expert_group).reshape(num_token, -1)
    tmp_scores = scores.masked_fill(~score_mask.bool(), float("-inf"))
    if bias is not None:
        topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=False)[1]
        topk_weights = original_scores.gather(1, topk_ids)
    else:
        topk_weights, topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=False)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights.to(torch.float32) * scale, topk_ids.to(torch.int32)


def torch_moe(x, w13, w2, tw, ids):
    out = torch.zeros_like(x)
    inter = w13.shape[1] // 2
    for e in range(w13.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ w13[e].t()
        a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        y = a @ w2[e].t()
        out.index_add_(0, tok, (y.float() * tw[tok, slot, None]).to(x.dtype))
    return out


def mix_logits(s32, phi):
    v = s32.reshape(*s32.shape[:-2], -1)
    r = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (v @ phi.t()) * r


def mhc_pre(s, phi, alpha, bias, iters=20, eps=1e-6):
    n = s.shape[-2]
    s32 = s.float()
    m = mix_logits(s32, phi)
    pre = torch.sigmoid(alpha[0] * m[..., :n] + bias[:n]) + 1e-6
    post = 2 * torch.sigmoid(alpha[1] * m[..., n:2 * n] + bias[n:2 * n])
    c = (alpha[2] * m[..., 2 * n:] + bias[2 * n:]).reshape(*m.shape[:-1], n, n)
    c = torch.softmax(c, -1) + eps
    c = c / (c.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(-1, keepdim=True) + eps)
        c = c / (c.sum(-2, keepdim=True) + eps)
    layer_in = (pre.unsqueeze(-1) * s32).sum(-2).to(s.dtype)
    return layer_in, post, c


def mhc_post(f, s, post, comb):
    return (post.unsqueeze(-1) * f.float().unsqueeze(-2) + torch.einsum("tjk,tjh->tkh", comb, s.float())).to(s.dtype)


def mhc_collapse(s, phi, alpha, bias):
    w = torch.sigmoid(alpha[0] * mix_logits(s.float(), phi) + bias)
    return (w.unsqueeze(-1) * s.float()).sum(-2).to(s.dtype)


def build(c):
    dt = DT[c["dtype"]]
    p = c["p"]
    dev = "cuda"
    op = c["op"]
    if op == "llm.topkSoftmax":
        g = torch.randn(p["T"], p["E"], device=dev, dtype=dt)

        def f():
            w = torch.softmax(g, dim=-1, dtype=torch.float32)
            tw, ti = torch.topk(w, p["k"], dim=-1)
            tw = tw / tw.sum(dim=-1, keepdim=True)
            return tw, ti.to(torch.int32)
        return f, "torch.softmax+topk+renorm", p["T"] * p["E"] * g.element_size() + p["T"] * p["k"] * 8, f"[{p['T']}, {p['E']}] k={p['k']}"
    if op == "llm.groupedTopk":
        g = torch.randn(p["T"], p["E"], device=dev, dtype=dt)
        b = torch.randn(p["E"], device=dev, dtype=torch.float32) * 0.1
        f = lambda: grouped_topk(g.float(), p["k"], True, p["groups"], p["topkGroup"], "sigmoid", b, p["scale"])
        return f, "vllm grouped_topk (python)", p["T"] * p["E"] * g.element_size() + p["T"] * p["k"] * 8, f"[{p['T']}, {p['E']}] k={p['k']} g={p['groups']}/{p['topkGroup']} sigmoid+bias"
    if op == "llm.moeSum":
        x = torch.randn(p["T"], p["k"], p["H"], device=dev, dtype=dt)
        return (lambda: x.sum(dim=1)), "x.sum(dim=1)", (p["T"] * p["k"] * p["H"] + p["T"] * p["H"]) * x.element_size(), f"[{p['T']}, {p['k']}, {p['H']}]"
    if op == "llm.fusedMoe":
        t, h, i, e, k = p["T"], p["H"], p["I"], p["E"], p["k"]
        x = torch.randn(t, h, device=dev, dtype=dt)
        w13 = torch.randn(e, 2 * i, h, device=dev, dtype=dt) * 0.02
        w2 = torch.randn(e, h, i, device=dev, dtype=dt) * 0.02
        ids = torch.stack([torch.randperm(e, device=dev)[:k] for _ in range(t)]).to(torch.int32)
        tw = torch.rand(t, k, device=dev, dtype=torch.float32)
        byts = (w13.numel() + w2.numel() + 2 * x.numel()) * x.element_size()
        return (lambda: torch_moe(x, w13, w2, tw, ids)), "loop over experts (torch_moe)", byts, f"T={t} H={h} I={i} E={e} k={k}"
    if op.startswith("llm.mhc"):
        t, n, h = p["T"], p["n"], p["H"]
        s = torch.randn(t, n, h, device=dev, dtype=dt)
        rows = n * (n + 2) if op == "llm.mhcPre" else n
        phi = torch.randn(rows, n * h, device=dev, dtype=torch.float32) * 0.01
        alpha = torch.rand(3, device=dev) + 0.5
        bias = torch.randn(rows, device=dev) * 0.1
        shape = f"[{t}, {n}, {h}]"
        if op == "llm.mhcPre":
            return (lambda: mhc_pre(s, phi, alpha, bias)), "torch composite", s.numel() * s.element_size() + t * h * s.element_size(), shape
        if op == "llm.mhcHeadCollapse":
            return (lambda: mhc_collapse(s, phi, alpha, bias)), "torch composite", s.numel() * s.element_size() + t * h * s.element_size(), shape
        f_ = torch.randn(t, h, device=dev, dtype=dt)
        post = torch.rand(t, n, device=dev)
        comb = torch.rand(t, n, n, device=dev)
        return (lambda: mhc_post(f_, s, post, comb)), "torch composite (einsum)", (2 * s.numel() + f_.numel()) * s.element_size(), shape
    if op == "topk":
        x = torch.randn(p["rows"], p["R"], device=dev, dtype=dt)
        return (lambda: torch.topk(x, p["k"], dim=-1)), "torch.topk", x.numel() * x.element_size(), f"[{p['rows']}, {p['R']}] k={p['k']}"
    if op == "sort":
        x = torch.randn(p["rows"], p["R"], device=dev, dtype=dt)
        return (lambda: torch.sort(x, dim=-1, stable=True)), "torch.sort(stable)", x.numel() * (2 * x.element_size() + 8), f"[{p['rows']}, {p['R']}]"
    raise ValueError(op)


# The first case of each op first runs up to JIT_WARMUP_CALLS calls or JIT_WARMUP_S of host time,
# as the Kiln side (bench/llm-moe-cuda.ts) does to reach V8's steady state: the same warm-up for both.
JIT_WARMUP_CALLS = 20000
JIT_WARMUP_S = 0.4
_warmed = set()


def time_ms(f, op=None):
    if op is not None and op not in _warmed:
        _warmed.add(op)
        t0 = time.perf_counter()
        i = 0
        while i < JIT_WARMUP_CALLS and (i < 200 or time.perf_counter() - t0 < JIT_WARMUP_S):
            f()
            i += 1
        torch.cuda.synchronize()
    for _ in range(WARMUP):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


COMPILE_MODES = ["default", "reduce-overhead", "max-autotune"]


def compile_modes(argv):
    if "--compile-modes" not in argv:
        return COMPILE_MODES
    i = argv.index("--compile-modes") + 1
    modes = []
    while i < len(argv) and not argv[i].startswith("--"):
        modes.append(argv[i])
        i += 1
    bad = [m for m in modes if m not in COMPILE_MODES + ["none"]]
    if bad:
        raise SystemExit(f"--compile-modes: unknown {bad}; one or more of {COMPILE_MODES}, or none")
    return [] if "none" in modes else modes


def compiled(f, mode):
    """torch.compile of the case's thunk; the CUDA-graph modes mark each call a new step."""
    c = torch.compile(f, mode=None if mode == "default" else mode, dynamic=False)
    if mode == "default":
        return c

    def call():
        torch.compiler.cudagraph_mark_step_begin()
        return c()
    return call


def main():
    out = sys.argv[1]
    quick = "--quick" in sys.argv
    modes = compile_modes(sys.argv)
    rows = []
    torch.manual_seed(0)

    def emit(c, shape, ms, impl, byts):
        rows.append({**c, "shape": shape, "torch_ms": ms, "torch_impl": impl, "bytes": byts})
        print(f"torch {c['op']:22} {c['dtype']:9} {shape:42} {impl[:24]:24} {ms:9.4f} ms", flush=True)
        # Written after every row: a run stopped at its time limit still leaves the finished rows.
        with open(out, "w") as fh:
            json.dump(rows, fh)

    for c in cases(quick):
        f, impl, byts, shape = build(c)
        with torch.no_grad():
            emit(c, shape, time_ms(f, c["op"]), impl, byts)
            for mode in modes if c["op"].startswith("llm.") else ():
                try:
                    torch._dynamo.reset()
                    emit(c, shape, time_ms(compiled(f, mode)), f"compile:{mode}", byts)
                except Exception as e:  # recorded by its absence; the log says why
                    print(f"torch {c['op']:22} {c['dtype']:9} {shape:42} compile:{mode} FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
