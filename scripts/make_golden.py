"""Golden outputs from PyTorch for Kiln's CPU ops (run on the device machine, which has PyTorch).

    python3 scripts/make_golden.py test/fixtures/golden.json

Each case stores float32 inputs (as lists), the op's attributes, PyTorch's output computed in
float64 from those same float32 values (so the fixture is an independent, high-precision
reference), and the output strides PyTorch gives for the float32 computation (so Kiln's layout
rules are checked against the real thing). Keep the fixture small: inputs are tiny.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
cases = []


def t32(*shape, lo=-2.0, hi=2.0):
    return (torch.rand(*shape, dtype=torch.float32) * (hi - lo) + lo)


def enc(x):
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", ""),
                "data": x.detach().reshape(-1).tolist()}
    return x


def add(name, fn, inputs, attrs=None, layouts=None):
    """fn(*inputs, **attrs) is run in float64 for values and float32 for strides."""
    attrs = attrs or {}
    layouts = layouts or {}

    def prep(x, dtype, i):
        if not isinstance(x, torch.Tensor):
            return x
        y = x.to(dtype) if x.is_floating_point() else x
        lay = layouts.get(i)
        if lay == "channels_last":
            y = y.contiguous(memory_format=torch.channels_last)
        elif lay == "transposed":
            y = y.permute(*reversed(range(y.dim()))).contiguous().permute(*reversed(range(y.dim())))
        return y

    out64 = fn(*[prep(x, torch.float64, i) for i, x in enumerate(inputs)], **attrs)
    out32 = fn(*[prep(x, torch.float32, i) for i, x in enumerate(inputs)], **attrs)
    outs64 = list(out64) if isinstance(out64, (tuple, list)) else [out64]
    outs32 = list(out32) if isinstance(out32, (tuple, list)) else [out32]
    cases.append({
        "name": name,
        "inputs": [enc(x) for x in inputs],
        "layouts": {str(k): v for k, v in layouts.items()},
        "attrs": attrs,
        "outputs": [enc(o) for o in outs64],
        "strides": [list(o.stride()) for o in outs32],
    })


x = torch.cat([t32(40, lo=-6, hi=6), torch.tensor([0.0, 1e-3, -1e-3, 10.0, -10.0, 30.0, -30.0])])
for op in ["erf", "gelu", "gelu_tanh", "silu", "sigmoid", "softplus", "tanh", "expm1", "log1p_abs", "rsqrt_abs"]:
    fns = {
        "erf": torch.erf, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
        "silu": F.silu, "sigmoid": torch.sigmoid, "softplus": F.softplus, "tanh": torch.tanh,
        "expm1": torch.expm1, "log1p_abs": lambda v: torch.log1p(v.abs()), "rsqrt_abs": lambda v: torch.rsqrt(v.abs() + 0.1),
    }
    add(op, fns[op], [x])

a, b = t32(3, 4), t32(4) + 3
add("pow_broadcast", lambda p, q: torch.pow(p.abs(), q), [a, b])
add("remainder", lambda p, q: torch.remainder(p * 3, q - 3.5), [a, b])
add("div_floor", lambda p, q: torch.div(p * 5, q - 3.5, rounding_mode="floor"), [a, b])
add("atan2", torch.atan2, [a, b - 3])
add("add_transposed_strides", lambda p, q: p + q, [t32(3, 4), t32(3, 4)], layouts={0: "transposed"})
add("mul_channels_last_strides", lambda p, q: p * q, [t32(2, 3, 4, 5), t32(3, 1, 1)], layouts={0: "channels_last"})

r = t32(4, 6, 5)
add("softmax_dim1", lambda v: torch.softmax(v, 1), [r])
add("log_softmax_last", lambda v: torch.log_softmax(v, -1), [r])
add("logsumexp_02", lambda v: torch.logsumexp(v, (0, 2)), [r])
add("var_dim2", lambda v: torch.var(v, 2, keepdim=True), [r])
add("std_all_c0", lambda v: torch.std(v, correction=0), [r])
add("cumsum_dim1", lambda v: torch.cumsum(v, 1), [r])
add("softmax_channels_last", lambda v: torch.softmax(v, 1), [t32(2, 3, 4, 5)], layouts={0: "channels_last"})
s = torch.tensor([3.0, 1.0, 2.0, 1.0, float("nan"), 3.0, -1.0, 2.0])
add("sort_stable", lambda v: torch.sort(v, stable=True), [s])
add("sort_desc_stable", lambda v: torch.sort(v, descending=True, stable=True), [s])
add("topk_3", lambda v: torch.topk(v, 3, dim=1), [t32(4, 7)])
add("argmax_dim0", lambda v: torch.argmax(v, 0), [t32(5, 3)])

add("matmul_batch_broadcast", torch.matmul, [t32(2, 1, 3, 4), t32(5, 4, 6)])
add("matmul_vec_mat", torch.matmul, [t32(4), t32(3, 4, 2)])
add("linear", F.linear, [t32(2, 3, 8), t32(5, 8), t32(5)])
add("addmm", lambda i, m1, m2: torch.addmm(i, m1, m2, beta=0.5, alpha=2.0), [t32(3, 5), t32(3, 4), t32(4, 5)])

add("layer_norm", lambda v, w, bb: F.layer_norm(v, (4, 5), w, bb, 1e-5), [t32(3, 4, 5), t32(4, 5), t32(4, 5)])
add("rms_norm", lambda v, w: F.rms_norm(v, (6,), w, 1e-6), [t32(4, 6), t32(6)])
add("group_norm_cl", lambda v, w, bb: F.group_norm(v, 2, w, bb, 1e-5), [t32(2, 4, 3, 3), t32(4), t32(4)], layouts={0: "channels_last"})
add("batch_norm_eval", lambda v, m, var, w, bb: F.batch_norm(v, m, var, w, bb, False, 0.1, 1e-5),
    [t32(2, 3, 4, 4), t32(3), t32(3, lo=0.5, hi=2), t32(3), t32(3)], layouts={0: "channels_last"})
add("batch_norm_train", lambda v, w, bb: F.batch_norm(v, None, None, w, bb, True, 0.1, 1e-5),
    [t32(4, 3, 2, 2), t32(3), t32(3)])

add("conv2d_s2_p3", lambda v, w, bb: F.conv2d(v, w, bb, stride=2, padding=3), [t32(2, 3, 9, 9), t32(4, 3, 7, 7), t32(4)])
add("conv2d_cl_dil_groups", lambda v, w: F.conv2d(v, w, None, stride=1, padding=2, dilation=2, groups=2),
    [t32(1, 4, 7, 6), t32(6, 2, 3, 3)], layouts={0: "channels_last"})
add("conv2d_depthwise_same", lambda v, w: F.conv2d(v, w, None, padding="same", groups=3), [t32(1, 3, 5, 5), t32(3, 1, 3, 3)])
add("max_pool_ceil", lambda v: F.max_pool2d(v, 3, 2, 1, ceil_mode=True), [t32(1, 2, 8, 7)], layouts={0: "channels_last"})
add("avg_pool_nopad", lambda v: F.avg_pool2d(v, 3, 2, 1, count_include_pad=False), [t32(1, 2, 7, 7)])

q, k, v = t32(1, 8, 5, 4), t32(1, 2, 6, 4), t32(1, 2, 6, 3)
add("sdpa_gqa_causal", lambda a1, a2, a3: F.scaled_dot_product_attention(a1, a2, a3, is_causal=True, enable_gqa=True), [q, k, v])
mask = torch.rand(5, 6) > 0.3
mask[:, 0] = True
add("sdpa_bool_mask", lambda a1, a2, a3, m: F.scaled_dot_product_attention(a1, a2, a3, attn_mask=m, scale=0.3),
    [t32(2, 1, 5, 4), t32(2, 1, 6, 4), t32(2, 1, 6, 3), mask])

emb_idx = torch.tensor([[0, 3, 1], [2, 2, 4]])
add("embedding", lambda i, w: F.embedding(i, w), [emb_idx, t32(5, 3)])
add("gather_dim1", lambda v, i: torch.gather(v, 1, i), [t32(3, 4), torch.tensor([[0, 3], [1, 1], [2, 0]])])
add("scatter_add_dim0", lambda v, i, src: torch.scatter_add(v, 0, i, src),
    [t32(3, 4), torch.tensor([[0, 1, 2, 0], [0, 0, 0, 2]]), t32(2, 4)])
add("index_put_acc", lambda v, i, val: torch.index_put(v, (i,), val, accumulate=True),
    [t32(5, 2), torch.tensor([1, 3, 1]), t32(3, 2)])
add("cat_dim1", lambda p, q2: torch.cat([p, q2], 1), [t32(2, 3), t32(2, 2)])
add("tril_m1", lambda v: torch.tril(v, -1), [t32(2, 4, 5)])

out = {"generator": "scripts/make_golden.py", "torch": torch.__version__, "cases": cases}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
print(f"wrote {len(cases)} cases to {sys.argv[1]}")
