// Block-tile sweep of the fused conv2dBatchNorm (+ReLU) on the conv-stack convolutions (helper
// "conv", session 4): CUDA events around BATCH back-to-back calls (the GPU queue stays full, so the
// calls' host work is hidden), median of REPS per tile, after warm-up. Prints one line per
// (conv, dtype): ms per call of each tile and which one pickTile chooses now.
import * as kiln from '../../dist/src/index.js';
import { convImpl, pickTile } from '../../dist/src/kernels/cuda/conv-igemm.js';

const REPS = 15;
const BATCH = 8;
const F = kiln.nn.functional;
const CONVS = [
  { name: 'body 64->64 3x3', x: [16, 64, 112, 112], w: [64, 64, 3, 3], stride: 1, pad: 1, tiles: ['m128w32k128', 'm128w32k128s4', 'm128w64k128'] },
  { name: 'stem 3->64 7x7 s2', x: [16, 3, 224, 224], w: [64, 3, 7, 7], stride: 2, pad: 3, tiles: ['m128w64', 'm128w32s5', 'm128w32k128s4'] },
];
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const cv of CONVS) for (const dtype of ['float32', 'bfloat16']) {
  const x = kiln.contiguous(kiln.randn(cv.x).to(dtype).to('cuda'), 'channelsLast');
  const w = kiln.mul(kiln.randn(cv.w), 0.05).to(dtype).to('cuda');
  const b = kiln.randn([64]).to(dtype).to('cuda');
  const bn = { runningMean: kiln.randn([64]).to(dtype).to('cuda'), runningVar: kiln.add(kiln.rand([64]), 0.5).to(dtype).to('cuda'), weight: kiln.randn([64]).to(dtype).to('cuda'), bias: kiln.randn([64]).to(dtype).to('cuda') };
  const run = () => kiln.noGrad(() => F.conv2dBatchNorm(x, w, b, bn, { stride: cv.stride, padding: cv.pad, relu: true }));
  const res = {};
  for (const tile of cv.tiles) {
    convImpl.tile = tile;
    try {
      for (let i = 0; i < 5; i++) run().dispose();
      const xs = [];
      for (let i = 0; i < REPS; i++) {
        const a = new kiln.Event('cuda'); const e = new kiln.Event('cuda');
        const ys = [];
        a.record(); for (let j = 0; j < BATCH; j++) ys.push(run()); e.record(); e.synchronize(); xs.push(a.elapsedTime(e) / BATCH);
        for (const y of ys) y.dispose();
      }
      res[tile] = median(xs).toFixed(4);
    } catch (err) { res[tile] = `ERR ${String(err.message).slice(0, 80)}`; }
  }
  convImpl.tile = null;
  const pick = pickTile(dtype === 'float32' ? 'tf32' : 'mma16', cv.name.startsWith('body') ? 'vec' : 'scalar', cv.w[1] * cv.w[2] * cv.w[3]);
  console.log(`${cv.name.padEnd(18)} ${dtype.padEnd(9)} pick=${pick} ${Object.entries(res).map(([k, v]) => `${k}=${v}`).join(' ')}`);
}
