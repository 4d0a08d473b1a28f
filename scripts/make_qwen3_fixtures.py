"""Tiny random Qwen3 and Qwen3-MoE checkpoints with reference logits, made with Hugging Face transformers
(run on the device machine, which has torch and transformers):

    python3 scripts/make_qwen3_fixtures.py test/fixtures

Writes test/fixtures/qwen3-tiny/ and test/fixtures/qwen3-moe-tiny/, each a Hugging Face style folder
(config.json, safetensors shards plus model.safetensors.index.json) and reference.json with the
input ids and float32 logits. Weights are re-drawn with a larger spread than the default init so the
logits are O(1) and a wrong layer shows up far above the 1e-4 tolerance. Kept under 2 MB in total.
"""
import json
import os
import sys

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

out_root = sys.argv[1]
common = dict(
    vocab_size=96,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
    tie_word_embeddings=True,
    attention_bias=False,
    torch_dtype="float32",
)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def build(name, model, seed):
    randomize(model, seed)
    model.eval()
    folder = os.path.join(out_root, name)
    os.makedirs(folder, exist_ok=True)
    # Small shards so the loader's index.json path is exercised.
    model.save_pretrained(folder, safe_serialization=True, max_shard_size="150KB")
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, model.config.vocab_size, (2, 9), generator=g)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    ref = {
        "generator": "scripts/make_qwen3_fixtures.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "input_ids": ids.tolist(),
        "logits_shape": list(logits.shape),
        "logits": [round(v, 7) for v in logits.reshape(-1).tolist()],
    }
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(ref, f)
    files = sorted(os.listdir(folder))
    size = sum(os.path.getsize(os.path.join(folder, x)) for x in files)
    print(name, files, size, "bytes", "max|logit|", logits.abs().max().item())


torch.manual_seed(0)
dense = Qwen3ForCausalLM(Qwen3Config(intermediate_size=128, **common)).to(torch.float32)
build("qwen3-tiny", dense, 11)

moe = Qwen3MoeForCausalLM(Qwen3MoeConfig(
    intermediate_size=128,
    moe_intermediate_size=32,
    num_experts=4,
    num_experts_per_tok=2,
    norm_topk_prob=True,
    decoder_sparse_step=1,
    mlp_only_layers=[],
    output_router_logits=False,
    **common,
)).to(torch.float32)
build("qwen3-moe-tiny", moe, 23)
