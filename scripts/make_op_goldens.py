"""PyTorch goldens for the ops of issue #19 item 5 (flip, roll, repeat, pad, norm, einsum,
interpolate, adaptive_avg_pool2d, conv1d, conv_transpose2d), written to
test/fixtures/op-goldens.json. Run on a machine with torch (no network needed):

    python3 scripts/make_op_goldens.py

Inputs are float64, deterministic (seeded), and stored with the outputs, so the test
(test/ops-nn-extra.test.ts) rebuilds them exactly; outputs are computed in float64 on the cpu.
"""
import json
import os

import torch
import torch.nn.functional as F

torch.manual_seed(19)


def t(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def enc(x):
    return {"shape": list(x.shape), "data": x.reshape(-1).tolist()}


cases = []


def case(name, inputs, out, **params):
    cases.append({"name": name, "params": params, "inputs": [enc(i) for i in inputs], "out": enc(out)})


x = t(2, 3, 4)
case("flip", [x], torch.flip(x, [0, 2]), dims=[0, 2])
case("roll", [x], torch.roll(x, [1, -2], [1, 2]), shifts=[1, -2], dims=[1, 2])
case("roll_flat", [x], torch.roll(x, 5), shifts=[5])
case("repeat", [x], x.repeat(2, 1, 1, 2), repeats=[2, 1, 1, 2])
for mode in ["constant", "reflect", "replicate", "circular"]:
    p = [2, 1, 1, 2]
    case("pad_" + mode, [x], F.pad(x, p, mode=mode), pad=p, mode=mode)
case("pad_constant_value", [x], F.pad(x, [-1, 2, 0, 1], value=0.5), pad=[-1, 2, 0, 1], mode="constant", value=0.5)
for p in ["fro", 1, 2, float("inf"), 3]:
    case("norm", [x], torch.norm(x, p=p, dim=[1, 2]), p=("inf" if p == float("inf") else p), dim=[1, 2])
case("norm", [x], torch.norm(x), p="fro", dim=None)
a, b, c = t(2, 3, 4), t(2, 4, 5), t(5, 6)
case("einsum", [a, b, c], torch.einsum("bij,bjk,kl->bil", a, b, c), equation="bij,bjk,kl->bil")
case("einsum", [a], torch.einsum("bij->j", a), equation="bij->j")
sq = t(4, 4)
case("einsum", [sq], torch.einsum("ii->i", sq), equation="ii->i")
e1, e2 = t(2, 1, 3, 4), t(4, 2)
case("einsum", [e1, e2], torch.einsum("...ij,jk->...ik", e1, e2), equation="...ij,jk->...ik")
im = t(2, 3, 5, 7)
case("interpolate", [im], F.interpolate(im, scale_factor=1.5, mode="nearest"), scaleFactor=1.5, mode="nearest")
case("interpolate", [im], F.interpolate(im, size=(3, 4), mode="nearest"), size=[3, 4], mode="nearest")
case("interpolate", [im], F.interpolate(im, size=(8, 9), mode="bilinear", align_corners=True), size=[8, 9], mode="bilinear", alignCorners=True)
case("interpolate", [im], F.interpolate(im, size=(4, 10), mode="bilinear", align_corners=False), size=[4, 10], mode="bilinear", alignCorners=False)
case("interpolate", [im], F.interpolate(im, scale_factor=(0.7, 2.3), mode="bilinear"), scaleFactor=[0.7, 2.3], mode="bilinear", alignCorners=False)
case("adaptiveAvgPool2d", [im], F.adaptive_avg_pool2d(im, (3, 4)), outputSize=[3, 4])
case("adaptiveAvgPool2d", [im], F.adaptive_avg_pool2d(im, (2, 7)), outputSize=[2, 7])
xi, w1, b1 = t(2, 4, 11), t(6, 2, 3), t(6)
case("conv1d", [xi, w1, b1], F.conv1d(xi, w1, b1, stride=2, padding=1, dilation=2, groups=2), stride=2, padding=1, dilation=2, groups=2)
xt, wt, bt = t(2, 4, 5, 6), t(4, 3, 3, 2), t(6)
case("convTranspose2d", [xt, wt, bt], F.conv_transpose2d(xt, wt, bt, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2)),
     stride=[2, 3], padding=[1, 0], outputPadding=[1, 2], groups=2, dilation=[1, 2])
xt2, wt2 = t(1, 3, 4, 4), t(3, 2, 3, 3)
case("convTranspose2d", [xt2, wt2], F.conv_transpose2d(xt2, wt2, stride=1, padding=2), stride=[1, 1], padding=[2, 2], outputPadding=[0, 0], groups=1, dilation=[1, 1])

here = os.path.dirname(os.path.abspath(__file__))
dst = os.path.join(here, "..", "test", "fixtures", "op-goldens.json")
with open(dst, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f)
print(f"wrote {len(cases)} cases to {dst}")
