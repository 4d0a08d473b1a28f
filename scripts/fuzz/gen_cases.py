"""Differential fuzzer, PyTorch half (issue #18 item 7): writes the fixture that
test/fuzz-replay.test.ts replays in Kiln.

    python3 scripts/fuzz/gen_cases.py --seed 18 --cases 3000 \
        --out test/fixtures/fuzz-cases.json.gz

Needs torch only (runs on the cpu; no network). Each case is a short program of 1-4 ops from
scripts/fuzz/ops.json, chained: step k's first tensor argument is step k-1's result, the other
tensor arguments are fresh inputs. Inputs are built in a random layout (contiguous, transposed,
last two dims swapped, strided with junk between elements, channels_last, expanded with stride 0)
and stored with their exact strides, storage offset and storage size, so Kiln rebuilds the very
same layout. Values are the float64 of the stored value (exact for every float dtype) with
non-finite values as the strings "nan", "inf", "-inf". Every step's output is recorded right
after the step (so in-place aliasing shows), or the error class of the step that raised; inputs
an in-place step changed are recorded after the program. The generator draws arguments from the
tensors it has actually computed, so every chain is shaped right; a dtype outside the op's list
is drawn now and then on purpose, and torch's error is then the expected result.

The ops' torch calls are the spec's strings; nothing here is specific to one op except the few
arguments torch spells differently (amax's "all dims", prod's missing dim, slicing).
"""
import argparse
import gzip
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DT = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
    "bool": torch.bool, "uint8": torch.uint8,
}
NAME = {v: k for k, v in DT.items()}
FLOATS = {"float32", "float64", "float16", "bfloat16"}
MAX_NUMEL = 96


def enc_num(v):
    """A JSON number, or a string for what JSON cannot hold (non-finite, int64 beyond 2^53)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, int) and abs(v) > 2**53:
        return str(v)
    return v


def values_of(t):
    flat = t.detach().reshape(-1)
    if t.dtype in (torch.float16, torch.bfloat16, torch.float32):
        flat = flat.to(torch.float64)  # exact: every such value is a float64
    return [enc_num(v) for v in flat.tolist()]


def storage_elems(t):
    try:
        return t.untyped_storage().nbytes() // t.element_size()
    except AttributeError:  # torch < 2.0, for a smoke run where 2.x is not at hand
        return t.storage().size()


def enc_tensor_out(t):
    return {"dtype": NAME[t.dtype], "shape": list(t.shape), "strides": list(t.stride()), "values": values_of(t)}


class Gen:
    def __init__(self, spec, rng):
        self.spec = spec
        self.rng = rng
        self.groups = spec["dtypeGroups"]

    # ---- shapes, values, layouts -------------------------------------------------------------
    def dtypes(self, op):
        d = op["dtypes"]
        return self.groups[d] if isinstance(d, str) else d

    def shape(self, min_rank=0):
        r = self.rng
        rank = max(min_rank, r.choices([0, 1, 2, 3, 4], [1, 3, 4, 3, 2])[0])
        while True:
            s = [r.choice([0, 1, 1, 2, 2, 3, 3, 4, 5]) if r.random() < 0.08 else r.choice([1, 1, 2, 2, 3, 3, 4, 5]) for _ in range(rank)]
            if math.prod(s) <= MAX_NUMEL:
                return s

    def raw_values(self, n, dtype):
        r = self.rng
        if dtype == "bool":
            return [r.random() < 0.5 for _ in range(n)]
        if dtype == "uint8":
            return [r.randint(0, 9) for _ in range(n)]
        if dtype in ("int32", "int64"):
            return [r.randint(-5, 5) for _ in range(n)]
        style = r.random()
        if style < 0.3:  # small integers: ties for argmax/amax/eq, exact sums
            vals = [float(r.randint(-2, 2)) for _ in range(n)]
        else:
            vals = [r.uniform(-3, 3) for _ in range(n)]
        if n and r.random() < 0.12:
            for _ in range(r.randint(1, 2)):
                vals[r.randrange(n)] = r.choice([math.nan, math.inf, -math.inf, -0.0, 0.0])
        return vals

    def tensor(self, shape, dtype, layout=None):
        """A tensor of `shape` with random values, in a random layout; returns (tensor, layout)."""
        r = self.rng
        rank = len(shape)
        choices = ["contiguous"] * 4 + ["transposed", "strided", "expanded"] + (["swapLast"] if rank >= 2 else []) + (["channelsLast"] * 2 if rank == 4 else [])
        layout = layout or r.choice(choices)
        tdt = DT[dtype]
        if layout == "expanded":
            src = [1 if (d > 1 and r.random() < 0.5) else d for d in shape]
            if src == list(shape):
                layout = "contiguous"
            else:
                base = torch.tensor(self.raw_values(math.prod(src), dtype), dtype=torch.float64 if dtype in FLOATS else None).to(tdt).reshape(src)
                return base.expand(*shape), layout
        vals = torch.tensor(self.raw_values(math.prod(shape), dtype), dtype=torch.float64 if dtype in FLOATS else None).to(tdt).reshape(shape)
        if layout == "contiguous":
            return vals.clone(), layout
        if layout == "transposed":
            perm = list(range(rank))[::-1]
            return vals.permute(perm).contiguous().permute(perm), layout
        if layout == "swapLast":
            return vals.transpose(-1, -2).contiguous().transpose(-1, -2), layout
        if layout == "channelsLast":
            return vals.contiguous(memory_format=torch.channels_last), layout
        # strided: every stride doubled and storage offset 3, junk in the gaps (as test/helpers/make.ts)
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc * 2)
            acc *= max(d, 1)
        strides = strides[::-1]
        size = 3 + sum((max(d, 1) - 1) * s for d, s in zip(shape, strides)) + 1
        buf = torch.full((size,), 1 if dtype == "bool" else 77, dtype=tdt)
        t = buf.as_strided(shape, strides, 3)
        t.copy_(vals)
        return t, layout

    # ---- arguments ---------------------------------------------------------------------------
    def pick_dtype(self, op, like=None):
        r = self.rng
        if like is not None and r.random() < 0.6:
            return like
        if r.random() < 0.05:
            return r.choice(self.groups["all"])
        return r.choice(self.dtypes(op))

    def bcast_shape(self, shape, to_self=False):
        r = self.rng
        s = list(shape)
        if s and r.random() < 0.3:
            s = s[r.randint(1, len(s)):]
        s = [1 if (d != 1 and r.random() < 0.3) else d for d in s]
        if not to_self and r.random() < 0.1 and len(s) < 4:
            s = [2] + s  # the other operand broadcasts self up (an error for in-place forms)
        return s

    def dim(self, rank):
        n = max(rank, 1)
        return self.rng.randint(-n, n - 1)

    def dims(self, rank, null_ok=True):
        r = self.rng
        u = r.random()
        if null_ok and u < 0.2:
            return None
        if rank == 0 or u < 0.6:
            return self.dim(rank)
        k = r.randint(1, rank)
        ds = r.sample(range(rank), k)
        return [d - rank if r.random() < 0.3 else d for d in ds]

    def arg(self, a, x, ctx, op):
        """One argument: a literal for the fixture and the value torch gets."""
        r, kind = self.rng, a["kind"]
        shape = list(x.shape) if x is not None else []
        rank = len(shape)
        if kind == "bool":
            v = r.random() < 0.5
            return v, v
        if kind in ("enum", "scalar"):
            v = r.choice(a["values"])
            if v == "-inf":
                return {"f": "-inf"}, -math.inf
            return v, v
        if kind == "dim":  # the first dim argument is the one other arguments were shaped for
            v = self.dim(rank) if ctx.get("dim_used") else ctx["dim"]
            ctx["dim_used"] = True
            return v, v
        if kind == "stackDim":
            v = r.randint(-(rank + 1), rank)
            ctx["dim"] = v
            return v, v
        if kind == "dims":
            v = self.dims(rank, a.get("nullOk", True))
            return v, v
        if kind == "dimOpt":
            v = None if r.random() < 0.3 else self.dim(rank)
            return v, v
        if kind == "dtype":
            v = r.choice(self.groups["all"])
            src = NAME[x.dtype]
            if src in FLOATS and v not in FLOATS:
                f = x.double()
                lo = 0 if v in ("uint8", "bool") else -2**31
                if v != "bool" and not (torch.isfinite(f).all() and (f >= lo).all() and (f < 2**31).all()):
                    v = "float32"  # torch's float->int cast of these is platform-defined
            return v, DT[v]
        if kind == "perm":
            v = list(range(rank))
            r.shuffle(v)
            return v, v
        if kind == "reshape":
            return self.reshape_arg(shape)
        if kind == "expand":
            v = [r.choice([1, 2, 3, -1]) if d == 1 else r.choice([-1, d]) for d in shape]
            if len(v) < 4 and r.random() < 0.3:
                v = [r.choice([1, 2])] + v
            lead = len(v) - rank
            if math.prod(shape[i - lead] if d == -1 else d for i, d in enumerate(v)) > MAX_NUMEL:
                v = [-1] * rank
            return v, v
        if kind == "sliceIndex":
            n = shape[ctx["dim"]] if rank else 1
            v = None if r.random() < 0.3 else r.randint(-n - 1, n + 1)
            return v, v
        return None  # tensor kinds: see tensor_arg

    def reshape_arg(self, shape):
        r = self.rng
        n = math.prod(shape)
        if n == 0:
            v = [0, r.choice([1, 2])] if r.random() < 0.5 else [0]
            return v, v
        factors, m, p = [], n, 2
        while m > 1:
            while m % p == 0:
                factors.append(p)
                m //= p
            p += 1
        r.shuffle(factors)
        k = r.randint(1, 4)
        v = [1] * k
        for f in factors:
            v[r.randrange(k)] *= f
        if r.random() < 0.3:
            v[r.randrange(k)] = -1
        return v, v

    def new_input(self, shape, dtype, inputs):
        t, layout = self.tensor(shape, dtype)
        inputs.append((t, layout, values_of(t)))  # values before any step can change them
        return len(inputs) - 1, t

    def tensor_arg(self, a, x, ctx, op, inputs):
        r, kind = self.rng, a["kind"]
        shape = list(x.shape) if x is not None else []
        rank = len(shape)
        xd = NAME[x.dtype] if x is not None else None
        if kind == "other":
            if a.get("scalarOk", True) and r.random() < 0.25:
                v = r.choice(a.get("scalars", [-1.5, 0, 1, 2, 0.5, 3]))
                return v, v
            i, t = self.new_input(self.bcast_shape(shape), self.pick_dtype(op, xd), inputs)
            return {"in": i}, t
        if kind == "mask":
            i, t = self.new_input(self.bcast_shape(shape, a.get("toSelf", False)), "bool", inputs)
            return {"in": i}, t
        if kind == "matOther":
            k = shape[-1]
            m = r.choice([1, 2, 3])
            if rank == 1:
                s = r.choice([[k], [k, m], [2, k, m]])
            else:
                s = [k, m] if r.random() < 0.5 else shape[:-2] + [k, m]
            i, t = self.new_input(s, self.pick_dtype(op, xd if r.random() < 0.9 else None), inputs)
            return {"in": i}, t
        if kind in ("catList", "stackList"):
            refs, ts = [ctx["self_ref"]], [x]
            for _ in range(r.randint(1, 2)):
                s = list(shape)
                if kind == "catList" and rank:
                    s[ctx["dim"]] = r.choice([0, 1, 2])
                i, t = self.new_input(s, self.pick_dtype(op, xd if r.random() < 0.8 else None), inputs)
                refs.append({"in": i})
                ts.append(t)
            return {"list": refs}, ts
        if kind == "gatherIndex":
            d = ctx["dim"]
            n = shape[d] if rank else 1
            s = [r.randint(0, sz) if j != (d % max(rank, 1)) else (r.randint(0, 3) if n else 0) for j, sz in enumerate(shape)]
            vals = [r.randrange(n) if n else 0 for _ in range(math.prod(s))]
            if vals and r.random() < 0.03:
                vals[0] = n  # out of range: torch raises
            return self.index_input(s, vals, inputs)
        if kind == "selectIndex":
            n = shape[ctx["dim"]] if rank else 1
            ln = (r.randint(0, 4) if rank else r.randint(0, 1)) if n else 0
            vals = [r.randrange(n) for _ in range(ln)]
            return self.index_input([ln], vals, inputs, r.random() < 0.2)
        raise ValueError(f"unknown arg kind {kind}")

    def index_input(self, shape, vals, inputs, int32=False):
        t = torch.tensor(vals, dtype=torch.int32 if int32 else torch.int64).reshape(shape)
        layout = "contiguous"
        if len(shape) >= 2 and self.rng.random() < 0.3:
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
            layout = "swapLast"
        inputs.append((t, layout, values_of(t)))
        return {"in": len(inputs) - 1}, t


def call_torch(spec_op, name, vals, inplace):
    """Runs one step in torch; vals: the argument values in spec order (dict by name)."""
    args = spec_op["args"]
    kw_names = spec_op.get("torchKw", {})
    order = spec_op.get("torchPos", [a["name"] for a in args])
    pos = [vals[n] for n in order if n not in kw_names]
    kw = {kw_names[n]: vals[n] for n in kw_names}
    none_dims = spec_op.get("torchNoneDims")
    if none_dims and vals.get("dim") is None:
        if none_dims == "empty":
            pos[1] = ()
        else:  # torch.prod has no dim=None overload: drop dim and keepdim
            pos = pos[:1]
    if inplace:
        return getattr(pos[0], spec_op["inplace"][1:])(*pos[1:], **kw)
    fn = spec_op["torch"]
    if fn == "@slice":
        x, d, start, end, step = pos
        idx = [slice(None)] * x.dim() + [slice(None)]
        idx[d % max(x.dim(), 1)] = slice(start, end, step)
        return x[tuple(idx[: max(x.dim(), 1)])]
    if fn.startswith("."):
        return getattr(pos[0], fn[1:])(*pos[1:], **kw)
    mod, attr = fn.split(".")
    return getattr(F if mod == "F" else torch, attr)(*pos, **kw)


def gen_case(g, spec, cid, first_op):
    r = g.rng
    names = list(spec["ops"])
    inputs, steps = [], []
    x, x_ref = None, None
    error = None
    for k in range(r.choice([1, 2, 2, 3, 3, 4])):
        if k == 0:
            name = first_op
        else:
            fits = [n for n in names if NAME[x.dtype] in g.dtypes(spec["ops"][n]) and x.dim() >= spec["ops"][n].get("minRank", 0)]
            name = r.choice(fits if r.random() < 0.95 and fits else names)
        op = spec["ops"][name]
        if k == 0:
            dtype = g.pick_dtype(op)
            _, x = g.new_input(g.shape(op.get("minRank", 0)), dtype, inputs)
            x_ref = {"in": 0}
        if x.dim() < op.get("minRank", 0):
            break
        inplace = "inplace" in op and r.random() < 0.2
        ctx = {"self_ref": x_ref, "dim": g.dim(x.dim())}
        lits, vals = {}, {}
        for a in op["args"]:
            if a["kind"] == "self":
                lits[a["name"]], vals[a["name"]] = x_ref, x
                continue
            got = g.arg(a, x, ctx, op)
            if got is None:
                got = g.tensor_arg(a, x, ctx, op, inputs)
            lits[a["name"]], vals[a["name"]] = got
        if op.get("torchNoneDims") == "omit" and vals.get("dim") is None:
            lits["keepdim"] = vals["keepdim"] = False  # torch.prod(x) has no keepdim: keep both sides alike
        step = {"op": name, "inplace": inplace, "args": [lits[a["name"]] for a in op["args"]]}
        steps.append(step)
        try:
            out = call_torch(op, name, vals, inplace)
        except Exception as e:  # noqa: BLE001 - torch's error is the expected result
            error = {"step": k, "type": type(e).__name__, "msg": str(e).split("\n")[0][:160]}
            break
        step["out"] = enc_tensor_out(out)
        x, x_ref = out, {"step": k}
        if out.numel() > 4 * MAX_NUMEL:
            break
    return inputs, steps, error


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--spec", default=os.path.join(HERE, "ops.json"))
    p.add_argument("--out", default=os.path.join(HERE, "..", "..", "test", "fixtures", "fuzz-cases.json.gz"))
    p.add_argument("--max-bytes", type=int, default=3_000_000)
    opts = p.parse_args()
    torch.set_num_threads(1)  # one reduction order, whatever the machine
    spec = json.load(open(opts.spec))
    names = list(spec["ops"])
    cases, coverage, gen_failures = [], {}, 0
    t0 = time.time()
    for cid in range(opts.cases):
        g = Gen(spec, random.Random(opts.seed * 1_000_003 + cid))
        try:
            inputs, steps, error = gen_case(g, spec, cid, names[cid % len(names)])
        except Exception as e:  # a generator bug, not a torch result: count it, keep going
            gen_failures += 1
            print(f"case {cid}: generator failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        enc_inputs = [{"dtype": NAME[t.dtype], "shape": list(t.shape), "strides": list(t.stride()), "offset": t.storage_offset(),
                       "size": storage_elems(t), "layout": layout, "values": before} for t, layout, before in inputs]
        case = {"id": cid, "inputs": enc_inputs, "steps": steps}
        if error:
            case["error"] = error
        changed = {str(i): values_of(t) for i, (t, _, before) in enumerate(inputs) if values_of(t) != before}
        if changed:
            case["mutated"] = changed
        cases.append(case)
        for s in steps:
            key = s["op"] + ("_" if s["inplace"] else "")
            coverage.setdefault(key, set()).add(enc_inputs[0]["dtype"])
    doc = {"format": 1, "torch": torch.__version__, "seed": opts.seed, "spec": spec, "cases": cases}
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    blob = gzip.compress(data, 9, mtime=0) if opts.out.endswith(".gz") else data
    if len(blob) > opts.max_bytes:
        sys.exit(f"fixture is {len(blob)} bytes, over --max-bytes {opts.max_bytes}: lower --cases")
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    with open(opts.out, "wb") as f:
        f.write(blob)
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(cases)} cases ({errors} expect a torch error, {gen_failures} generator failures) "
          f"in {time.time() - t0:.1f}s; {len(blob)} bytes -> {opts.out}")
    missing = [n for n in names if n not in coverage]
    print("ops never run:", missing or "none")
    if gen_failures > opts.cases // 20:
        sys.exit("too many generator failures")


if __name__ == "__main__":
    main()
