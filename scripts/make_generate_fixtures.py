"""Greedy generation references for the tiny Qwen3 fixtures, made with Hugging Face transformers'
`generate` (run on the device machine, which has torch and transformers):

    python3 scripts/make_generate_fixtures.py test/fixtures

Reads test/fixtures/qwen3-tiny/ and test/fixtures/qwen3-moe-tiny/ (made by make_qwen3_fixtures.py)
and writes generate.json into each: several prompts of different lengths (seeded), each generated
alone in float32 on the CPU with do_sample=False for 32 new tokens (no end-of-sequence token, so
every prompt runs the full 32), and per new token the gap between the two largest logits, so a
test can tell a real mismatch from a near tie that float rounding could flip.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

root = sys.argv[1]
NEW_TOKENS = 32
LENGTHS = [1, 3, 7, 12, 20]

for name, seed in (("qwen3-tiny", 101), ("qwen3-moe-tiny", 202)):
    folder = os.path.join(root, name)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    cases = []
    for n in LENGTHS:
        ids = torch.randint(0, model.config.vocab_size, (1, n), generator=g)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
                output_scores=True,
                return_dict_in_generate=True,
            )
        gaps = []
        for s in out.scores:
            top2 = torch.topk(s[0].float(), 2).values
            gaps.append(round(float(top2[0] - top2[1]), 6))
        cases.append({"prompt": ids[0].tolist(), "generated": out.sequences[0, n:].tolist(), "top2_gap": gaps})
        print(name, n, out.sequences[0, n:].tolist()[:8], "min gap", min(gaps))
    ref = {
        "generator": "scripts/make_generate_fixtures.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "new_tokens": NEW_TOKENS,
        "do_sample": False,
        "cases": cases,
    }
    with open(os.path.join(folder, "generate.json"), "w") as f:
        json.dump(ref, f)
