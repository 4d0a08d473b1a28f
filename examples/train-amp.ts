/**
 * Mixed-precision training with gradient checkpointing: a 4-block residual MLP regresses a smooth
 * function of 16 inputs on seeded synthetic data. The forward runs under kiln.autocast('bfloat16')
 * (linear layers in bfloat16, the loss in float32, float32 master weights and gradients); each
 * block is a kiln.checkpoint, so backward recomputes its activations instead of keeping them.
 * A kiln.amp.GradScaler is there for float16 (pass `float16` as the first argument); with bfloat16
 * it is disabled and a pass-through. Runs in a few seconds on the CPU, after a build:
 *
 *   node dist/examples/train-amp.js [bfloat16|float16]
 */
import * as kiln from '../src/index.js';
import type { Tensor } from '../src/index.js';

const { nn, optim } = kiln;
const dtype = (process.argv[2] ?? 'bfloat16') as kiln.amp.AutocastDtype;

kiln.manualSeed(0);
const width = 32;
const x = kiln.randn([128, 16]);
const y = kiln.sin(x.sum(1, true).mul(0.5)).add(x.narrow(1, 0, 1).square().mul(0.1));

const inp = new nn.Linear(16, width);
const blocks = Array.from({ length: 4 }, () => new nn.Sequential(new nn.LayerNorm(width), new nn.Linear(width, width), new nn.GELU()));
const out = new nn.Linear(width, 1);
const params = [inp, ...blocks, out].flatMap((m) => [...m.parameters()]);
const opt = new optim.AdamW(params, { lr: 2e-3, weightDecay: 0.01 });
const scaler = new kiln.amp.GradScaler({ enabled: dtype === 'float16' });

function forward(t: Tensor): Tensor {
  let h = inp.forward(t);
  // Residual blocks, each recomputed in backward instead of saving its activations.
  for (const b of blocks) h = h.add(kiln.checkpoint((u: Tensor) => b.forward(u), h));
  return out.forward(h);
}

for (let step = 0; step <= 150; step++) {
  kiln.scope(() => {
    opt.zeroGrad();
    const loss = kiln.autocast(dtype, () => kiln.nn.functional.mseLoss(forward(x), y));
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    if (step % 30 === 0) console.log(`step ${step}  loss ${(loss.item() as number).toFixed(5)}  (${loss.dtype}, scale ${scaler.getScale()})`);
  });
}
