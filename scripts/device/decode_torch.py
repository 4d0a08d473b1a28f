"""PyTorch anchor of bench/decode.ts (issue #17): Qwen3-0.6B shapes, seeded random weights, bf16,
on the GPU, B prompts of 128 random tokens, 256 new tokens (min_new_tokens forces the length).

Forms measured, each after a warm-up generate at the same batch size:
  hf-static-compiled  transformers generate with a static cache, which compiles the decoding
                      forward itself (generation_config.compile_config: torch.compile fullgraph,
                      mode "reduce-overhead", so CUDA graphs; transformers marks each step for the
                      graph trees): the gpt-fast recipe inside transformers, the strongest form here;
  hf-eager            transformers generate, dynamic cache, no compile.
decode_tok_s = B * (new - 1) / (time(generate new) - time(generate 1)); ttft_ms = time(generate 1),
both medians of the timed runs, with torch.cuda.synchronize around each.

  python scripts/device/decode_torch.py --batches 1,8 --json out.json
"""
import argparse, json, os, socket, statistics, time

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--batches", default="1,8")
p.add_argument("--prompt", type=int, default=128)
p.add_argument("--new", type=int, default=256)
p.add_argument("--forms", default="hf-static-compiled,hf-eager")
p.add_argument("--reps", type=int, default=3)
p.add_argument("--json")
a = p.parse_args()

cfg = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                  rope_theta=1_000_000, tie_word_embeddings=True, attention_bias=False,
                  max_position_embeddings=40960)
torch.manual_seed(0)
model = Qwen3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
rows = []


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1000


for form in a.forms.split(","):
    model.generation_config.cache_implementation = "static" if form == "hf-static-compiled" else None
    if form == "hf-static-compiled" and getattr(model.generation_config, "compile_config", None) is not None:
        print("compile_config:", model.generation_config.compile_config.to_dict() if hasattr(model.generation_config.compile_config, "to_dict") else model.generation_config.compile_config, flush=True)
    for b in [int(x) for x in a.batches.split(",")]:
        g = torch.Generator().manual_seed(100 + b)
        ids = torch.randint(0, cfg.vocab_size, (b, a.prompt), generator=g).cuda()
        mask = torch.ones_like(ids)

        def gen(n):
            with torch.no_grad():
                return model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)

        try:
            gen(a.new)  # warm-up: compile and capture every shape the timed runs use
            gen(1)
            full = [timed(lambda: gen(a.new)) for _ in range(a.reps)]
            first = [timed(lambda: gen(1)) for _ in range(a.reps)]
        except Exception as e:  # report and go on with the other forms
            print(f"{form} batch {b}: FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            rows.append(dict(framework="pytorch", workload="decode", form=form, batch=b, error=f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        tf, t1 = statistics.median(full), statistics.median(first)
        tok_s = b * (a.new - 1) / ((tf - t1) / 1000)
        row = dict(framework="pytorch", workload="decode", form=form, model="qwen3-0.6b", device="cuda", dtype="bfloat16",
                   batch=b, prompt_tokens=a.prompt, new_tokens=a.new, decode_tok_s=round(tok_s), ttft_ms=round(t1, 2),
                   full_ms=[round(x, 1) for x in full], first_ms=[round(x, 2) for x in first])
        rows.append(row)
        print(f"{form:20s} batch {b:3d}  decode {tok_s:8.0f} tok/s  ttft {t1:7.2f} ms", flush=True)

meta = dict(machine=socket.gethostname(), gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            torch=torch.__version__, transformers=transformers.__version__,
            command="python scripts/device/decode_torch.py " + " ".join(f"--{k} {v}" for k, v in vars(a).items() if v is not None))
if a.json:
    with open(a.json, "w") as f:
        json.dump(dict(meta=meta, results=rows), f, indent=2)
