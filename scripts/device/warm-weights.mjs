// Issue #17 (warm start): seeded random weights of a config built on cuda twice, with the GPU draw
// (kernels/cuda/random-draw.ts) and with the host draw + upload (KILN_DEVICE_RANDOM off): the time
// of each build (synchronized) and a sha256 over every parameter's bytes, which must be equal.
// Run from the repo root on the device machine with dist/ built:
//   node scripts/device/warm-weights.mjs [config=qwen3-0.6b] [dtype=bfloat16] [out.json]
import fs from 'node:fs';
import crypto from 'node:crypto';
import * as kiln from '../../dist/src/index.js';
import { setOption } from '../../dist/src/runtime/config.js';
import { itemSize } from '../../dist/src/tensor/dtype.js';
import { deviceDrawStats } from '../../dist/src/kernels/cuda/random-draw.js';

const [config = 'qwen3-0.6b', dtype = 'bfloat16', outFile] = process.argv.slice(2);
const cfg = { tiny: kiln.models.QWEN3_TINY, 'qwen3-0.6b': kiln.models.QWEN3_0_6B }[config];
if (!cfg) throw new Error(`warm-weights: unknown config ${config}`);

function build(deviceDraw) {
  setOption('KILN_DEVICE_RANDOM', deviceDraw);
  kiln.synchronize('cuda');
  const launches = deviceDrawStats.launches;
  const t0 = performance.now();
  const model = kiln.models.Qwen3ForCausalLM.fromConfig(cfg, { seed: 0, dtype, device: 'cuda' });
  kiln.synchronize('cuda');
  const ms = performance.now() - t0;
  const h = crypto.createHash('sha256');
  let bytes = 0;
  for (const [name, p] of Object.entries(model.stateDict())) {
    const c = p.to('cpu').contiguous();
    const size = c.numel() * itemSize(c.dtype);
    h.update(name).update(Buffer.from(c.storage.cpuArrayBuffer(), c.offset * itemSize(c.dtype), size));
    bytes += size;
  }
  for (const p of Object.values(model.stateDict())) p.dispose();
  return { deviceDraw, kernelFills: deviceDrawStats.launches - launches, ms: Math.round(ms), bytes, sha256: h.digest('hex') };
}

// The first build loads the accelerator and the draw kernel (NVRTC or the disk cache): build twice
// with the device draw and report the second as the steady time.
const first = build(true);
const gpu = build(true);
const host = build(false);
const result = { config, dtype, gpu_first_ms: first.ms, gpu_ms: gpu.ms, host_ms: host.ms, identical: gpu.sha256 === host.sha256 && first.sha256 === gpu.sha256, gpu, host };
// The GPU builds must have used the kernel (not the host fallback) and the host build must not.
result.ok = result.identical && gpu.kernelFills > 0 && host.kernelFills === 0;
console.log(JSON.stringify(result));
if (outFile) fs.writeFileSync(outFile, JSON.stringify(result, null, 2));
if (!result.ok) process.exit(1);
