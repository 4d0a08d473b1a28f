"""PyTorch goldens for nn.MultiheadAttention, nn.LSTM, nn.GRU and nn.MaxPool2d/AvgPool2d.

Writes test/fixtures/nn-goldens.json: per case the module arguments, the seeded float64 state dict
(PyTorch's names, which Kiln's modules use), the inputs and torch's outputs. test/nn-goldens.test.ts
loads the same weights into Kiln's modules and compares; it skips while the fixture is absent.

Run from the repository root (torch only, no network):
    python scripts/make_nn_goldens.py
"""
import json
import os

import torch

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


def flat(t):
    return {"shape": list(t.shape), "values": t.detach().reshape(-1).tolist(), "dtype": str(t.dtype).replace("torch.", "")}


def state(m):
    return {k: flat(v) for k, v in m.state_dict().items()}


cases = []

# MultiheadAttention: seq-first with bool key padding + attn masks, weights averaged.
mha = torch.nn.MultiheadAttention(6, 2)
with torch.no_grad():
    mha.in_proj_bias.uniform_(-0.5, 0.5)
    mha.out_proj.bias.uniform_(-0.5, 0.5)
q, k = torch.randn(3, 2, 6), torch.randn(4, 2, 6)
kpm = torch.tensor([[False, False, True, False], [False, False, False, True]])
am = torch.tensor([[False, True, False, False], [False, False, True, False], [False, False, False, False]])
out, w = mha(q, k, k, key_padding_mask=kpm, attn_mask=am, need_weights=True, average_attn_weights=True)
cases.append({"kind": "mha", "args": {"embedDim": 6, "numHeads": 2, "batchFirst": False}, "state": state(mha),
              "inputs": {"query": flat(q), "key": flat(k), "value": flat(k), "keyPaddingMask": flat(kpm), "attnMask": flat(am)},
              "outputs": {"output": flat(out), "weights": flat(w)}})

# MultiheadAttention: batch-first, per-head weights, no masks.
mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
x = torch.randn(2, 3, 4)
out, w = mha(x, x, x, need_weights=True, average_attn_weights=False)
cases.append({"kind": "mha", "args": {"embedDim": 4, "numHeads": 2, "batchFirst": True}, "state": state(mha),
              "inputs": {"query": flat(x), "key": flat(x), "value": flat(x), "averageAttnWeights": False},
              "outputs": {"output": flat(out), "weights": flat(w)}})

# LSTM / GRU: 2 layers, bidirectional, seq-first, with initial states; and batch-first defaults.
for kind in ("lstm", "gru"):
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(3, 4, num_layers=2, bidirectional=True)
    x = torch.randn(5, 2, 3)
    h0 = torch.randn(4, 2, 4)
    if kind == "lstm":
        c0 = torch.randn(4, 2, 4)
        out, (h, c) = m(x, (h0, c0))
        ins = {"input": flat(x), "h": flat(h0), "c": flat(c0)}
        outs = {"output": flat(out), "h": flat(h), "c": flat(c)}
    else:
        out, h = m(x, h0)
        ins = {"input": flat(x), "h": flat(h0)}
        outs = {"output": flat(out), "h": flat(h)}
    cases.append({"kind": kind, "args": {"inputSize": 3, "hiddenSize": 4, "numLayers": 2, "bidirectional": True, "batchFirst": False},
                  "state": state(m), "inputs": ins, "outputs": outs})
    m = cls(2, 3, batch_first=True)
    x = torch.randn(2, 4, 2)
    r = m(x)
    outs = {"output": flat(r[0]), "h": flat(r[1][0] if kind == "lstm" else r[1])}
    if kind == "lstm":
        outs["c"] = flat(r[1][1])
    cases.append({"kind": kind, "args": {"inputSize": 2, "hiddenSize": 3, "numLayers": 1, "bidirectional": False, "batchFirst": True},
                  "state": state(m), "inputs": {"input": flat(x)}, "outputs": outs})

# Pools (module arguments as Kiln names them).
x = torch.randn(2, 3, 7, 6)
for kind, kwargs, torch_kwargs in [
    ("maxPool2d", {"kernelSize": 3, "stride": 2, "padding": 1, "ceilMode": True}, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avgPool2d", {"kernelSize": 3, "stride": 2, "padding": 1, "countIncludePad": False}, dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
]:
    m = torch.nn.MaxPool2d(**torch_kwargs) if kind == "maxPool2d" else torch.nn.AvgPool2d(**torch_kwargs)
    cases.append({"kind": kind, "args": kwargs, "state": {}, "inputs": {"input": flat(x)}, "outputs": {"output": flat(m(x))}})

path = os.path.join(os.path.dirname(__file__), "..", "test", "fixtures", "nn-goldens.json")
with open(path, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f)
print(f"wrote {len(cases)} cases to {os.path.normpath(path)}")
