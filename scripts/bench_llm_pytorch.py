#!/usr/bin/env python3
"""PyTorch side of the LLM library benchmark (issue #6): vLLM's forward_native implementations,
torch.compile of each, and PyTorch's fused kernels where they exist.

The references are written as vLLM's CustomOp.forward_native writes them (composites of torch ops):
RMSNorm (with and without the fused residual add), SiluAndMul, GeluAndMul ('none', 'tanh') and
RotaryEmbedding (neox and gpt-j). Beside each, as more rows of the same (op, variant, shape, dtype):
  F.rms_norm          torch.nn.functional.rms_norm, PyTorch's own kernel (rmsNorm);
  add+F.rms_norm      x + residual, then F.rms_norm (fusedAddRmsNorm: PyTorch has no fused add+norm);
  compile:<mode>      torch.compile(forward_native, mode=<mode>, dynamic=False), per shape, for each
                      of --compile-modes (default, reduce-overhead = CUDA graphs, max-autotune).
Kiln is compared with each row, and scripts/bench_llm_merge.py reports the fastest PyTorch form. Timing: a pair of CUDA events around each rep, median of --reps (>= 50) after
--warmup reps. Device-to-device copy bandwidth (copy_ of a 1 GiB tensor) is measured in the same
run so that the kernels' bandwidth can be compared with it, and for the norms also copy_ of the very
bytes each row moves (a tensor of x's size for rmsNorm, of twice it for fusedAddRmsNorm), timed the
same way, so that small and mid sizes are compared with a copy of their own size ("copies").

Shapes follow vLLM's kernel benchmarks: tokens x hidden 4096/8192 for the norms, [tokens, 2*11008]
for act-and-mul, tokens x 32 heads x 128 (q and k) for RoPE. Op names are Kiln's (llm.rmsNorm...).

    python3 scripts/bench_llm_pytorch.py --json torch.json [--tokens 1 16 256 4096 16384] [--reps 50]
        [--compile-modes default reduce-overhead max-autotune | none] [--resume]

The compiled rows cost a compile each (90 shapes x 3 modes; max-autotune is the slow one), more
than one 10-minute device call: --resume keeps the rows already in --json and times only the
others, so the same command can be repeated until it prints "complete".
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# ---- vLLM forward_native references -------------------------------------------------------------

def rms_norm_native(x, weight, eps, residual=None):
    """vllm.model_executor.layers.layernorm.RMSNorm.forward_native."""
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    if residual is not None:
        x = x + residual.to(torch.float32)
        residual = x.to(orig_dtype)
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    x = x.to(orig_dtype)
    x = x * weight
    return x if residual is None else (x, residual)


def silu_and_mul_native(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def gelu_and_mul_native(x, approximate):
    d = x.shape[-1] // 2
    return F.gelu(x[..., :d], approximate=approximate) * x[..., d:]


def _apply_rotary_emb_torch(x, cos, sin, is_neox_style):
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def rope_native(positions, query, key, head_size, rotary_dim, cos_sin_cache, is_neox_style):
    """vllm.model_executor.layers.rotary_embedding.RotaryEmbedding.forward_native."""
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos_sin = cos_sin_cache.index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)
    out = []
    for t in (query, key):
        shape = t.shape
        t = t.view(num_tokens, -1, head_size)
        rot = _apply_rotary_emb_torch(t[..., :rotary_dim], cos, sin, is_neox_style)
        out.append(torch.cat((rot, t[..., rotary_dim:]), dim=-1).reshape(shape))
    return out[0], out[1]


def rope_cache(max_pos, rot, dtype, device):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rot, 2, dtype=torch.float32, device=device) / rot))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32, device=device), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)


# ---- timing -------------------------------------------------------------------------------------

# Each case first runs for STEADY_S of host time (at least `warmup` calls, at most STEADY_CALLS),
# as the Kiln side (bench/llm-cuda.ts) does to reach V8's steady state: the same warm-up for both.
STEADY_S = 0.060
STEADY_CALLS = 5000


def time_ms(fn, reps, warmup):
    t0 = time.perf_counter()
    i = 0
    while i < STEADY_CALLS and (i < warmup or time.perf_counter() - t0 < STEADY_S):
        fn()
        i += 1
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


COMPILE_MODES = ["default", "reduce-overhead", "max-autotune"]


def compiled_caller(ref, mode):
    """torch.compile(ref) in `mode`, specialised to the shapes it sees (dynamic=False: the best
    kernel for each shape, as Kiln's are). The CUDA-graph modes mark each call a new step so the
    graph's static outputs can be reused, as a serving loop would."""
    c = torch.compile(ref, mode=None if mode == "default" else mode, dynamic=False)
    if mode == "default":
        return c

    def call(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return c(*args)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 256, 4096, 16384])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", nargs="+", default=None, help="op names to time (default: all)")
    ap.add_argument("--compile-modes", nargs="+", default=COMPILE_MODES, choices=COMPILE_MODES + ["none"],
                    help="torch.compile modes of the forward_native rows ('none': no compiled rows)")
    ap.add_argument("--resume", action="store_true", help="keep the rows already in --json; time only the missing ones")
    a = ap.parse_args()
    modes = [] if "none" in a.compile_modes else a.compile_modes
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rows = []
    copies = {}
    prev = None
    if a.resume:
        try:
            prev = json.load(open(a.json))
        except (OSError, ValueError):
            prev = None
    if prev:
        rows, copies = prev["rows"], prev.get("copies", {})
    done = {(r["op"], r["variant"], tuple(r["shape"]), r["dtype"], r["torch_impl"]) for r in rows}
    failed = []

    def want(*ops):
        return a.only is None or any(op in a.only for op in ops)

    def add(op, shape, dtype, impl, timed, variant=""):
        """Times `timed` (a thunk returning the ms) unless this row is already in a resumed file."""
        if (op, variant, tuple(shape), dtype, impl) in done:
            return
        try:
            ms = timed()
        except Exception as e:  # a form that fails (a compile error) is reported, and the merge sees it missing
            print(f"{op:20s} {variant:5s} {impl:24s} {str(shape):18s} {dtype:9s} FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            torch._dynamo.reset()
            failed.append(f"{op} {variant} {impl} {shape} {dtype}")
            return
        rows.append({"op": op, "variant": variant, "shape": shape, "dtype": dtype, "torch_impl": impl, "torch_ms": ms})
        print(f"{op:20s} {variant:5s} {impl:24s} {str(shape):18s} {dtype:9s} {ms:9.4f} ms", flush=True)
        # Written after every row, so a run cut short by a time limit still leaves its rows.
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "copy": copy, "copies": copies, "rows": rows}, f)

    def add_forms(op, shape, dtype, ref, args, variant=""):
        """forward_native, then torch.compile of it in each mode (a fresh compile per mode and shape)."""
        add(op, shape, dtype, "forward_native", lambda: time_ms(lambda: ref(*args), a.reps, a.warmup), variant)
        for mode in modes:
            def timed():
                torch._dynamo.reset()
                f = compiled_caller(ref, mode)
                return time_ms(lambda: f(*args), a.reps, a.warmup)
            add(op, shape, dtype, f"compile:{mode}", timed, variant)

    def copy_same_bytes(nbytes):
        """copy_ of a tensor of nbytes (nbytes read + nbytes written), once per size."""
        if str(nbytes) in copies:
            return
        s_ = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).uniform_()
        d_ = torch.empty_like(s_)
        ms = time_ms(lambda: d_.copy_(s_), a.reps, a.warmup)
        copies[str(nbytes)] = {"torch_ms": ms, "gbps": 2 * nbytes / (ms * 1e-3) / 1e9}
        print(f"copy_ {nbytes} B: {ms:.4f} ms, {copies[str(nbytes)]['gbps']:.0f} GB/s", flush=True)
        del s_, d_

    # Copy bandwidth: copy_ of 1 GiB (read + write).
    if prev and "copy" in prev:
        copy = prev["copy"]
    else:
        n = (1 << 30) // 4
        src = torch.empty(n, dtype=torch.float32, device=dev).uniform_()
        dst = torch.empty_like(src)
        cms = time_ms(lambda: dst.copy_(src), 20, 3)
        copy = {"bytes": 1 << 30, "torch_ms": cms, "gbps": 2 * (1 << 30) / (cms * 1e-3) / 1e9}
        del src, dst
    print(f"copy_ 1 GiB: {copy['torch_ms']:.3f} ms, {copy['gbps']:.0f} GB/s (read + write)", flush=True)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "reps": a.reps, "warmup": a.warmup,
            "compile_modes": modes, "fused": ["F.rms_norm", "add+F.rms_norm"]}

    with torch.no_grad():
        for dn in a.dtype:
            dt = DTYPES[dn]
            for hidden in (4096, 8192) if want("llm.rmsNorm", "llm.fusedAddRmsNorm") else ():
                w = torch.rand(hidden, dtype=dt, device=dev) + 0.5
                for t in a.tokens:
                    x = torch.randn(t, hidden, dtype=dt, device=dev)
                    r = torch.randn(t, hidden, dtype=dt, device=dev)
                    # rmsNorm moves 2 x-sizes (read x, write out), fusedAdd 4 (x, residual both ways).
                    copy_same_bytes(x.numel() * x.element_size())
                    copy_same_bytes(2 * x.numel() * x.element_size())
                    add_forms("llm.rmsNorm", [t, hidden], dn, rms_norm_native, (x, w, 1e-6))
                    add("llm.rmsNorm", [t, hidden], dn, "F.rms_norm", lambda: time_ms(lambda: F.rms_norm(x, (hidden,), w, 1e-6), a.reps, a.warmup))
                    add_forms("llm.fusedAddRmsNorm", [t, hidden], dn, rms_norm_native, (x, w, 1e-6, r))
                    add("llm.fusedAddRmsNorm", [t, hidden], dn, "add+F.rms_norm",
                        lambda: time_ms(lambda: F.rms_norm(x + r, (hidden,), w, 1e-6), a.reps, a.warmup))
                    del x, r
            for t in a.tokens if want("llm.siluAndMul", "llm.geluAndMul") else ():
                x = torch.randn(t, 2 * 11008, dtype=dt, device=dev)
                add_forms("llm.siluAndMul", [t, 2 * 11008], dn, silu_and_mul_native, (x,))
                add_forms("llm.geluAndMul", [t, 2 * 11008], dn, gelu_and_mul_native, (x, "none"), "none")
                add_forms("llm.geluAndMul", [t, 2 * 11008], dn, gelu_and_mul_native, (x, "tanh"), "tanh")
                del x
            heads, hs, max_pos = 32, 128, 8192
            cache = rope_cache(max_pos, hs, dt, dev)
            for t in a.tokens if want("llm.rotaryEmbedding") else ():
                pos = torch.randint(0, max_pos, (t,), device=dev)
                q = torch.randn(t, heads * hs, dtype=dt, device=dev)
                k = torch.randn(t, heads * hs, dtype=dt, device=dev)
                for neox in (True, False):
                    add_forms("llm.rotaryEmbedding", [t, heads, hs], dn, rope_native, (pos, q, k, hs, hs, cache, neox), "neox" if neox else "gptj")
                del q, k
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "copy": copy, "copies": copies, "rows": rows}, f)
    if failed:
        print(f"incomplete: {len(failed)} forms failed (run again with --resume to retry them): " + "; ".join(failed), flush=True)
        raise SystemExit(1)
    print(f"complete: {len(rows)} rows in {a.json}", flush=True)


if __name__ == "__main__":
    main()
