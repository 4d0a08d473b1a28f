/**
 * topk of long rows on cuda (rows beyond the shared-memory sort): the three paths of
 * src/kernels/cuda/sort.ts side by side, register lists ('select'), sorted segments ('segments')
 * and radix select ('radix', what 'auto' picks for k <= 16384); per call (events around one
 * kiln.topk call, median) on vocabulary-sized rows.
 *
 *   node dist/bench/cuda-topk.js [--reps 50] [--json out.json]
 */
import fs from 'node:fs';
import os from 'node:os';
import * as kiln from '../src/index.js';
import { perCallMs } from './cuda-spin.js';
import { setLongTopk, type LongTopk } from '../src/kernels/cuda/sort.js';
const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const reps = Number(flag('--reps') ?? 50);

const perCall = (fn: () => void): number => perCallMs(fn, reps, 5);

const rows: { shape: number[]; dtype: string; k: number; ms: Record<string, number> }[] = [];
for (const dtype of ['float32', 'bfloat16'] as const) {
  for (const shape of [
    [1, 151936],
    [32, 151936],
    [256, 32000],
  ]) {
    const x = kiln.randn(shape).to(dtype).to('cuda');
    for (const k of [1, 8, 50, 64, 200, 2000]) {
      const ms: Record<string, number> = {};
      for (const mode of ['select', 'segments', 'radix'] as LongTopk[]) {
        if ((mode === 'select' && k > 64) || (mode === 'segments' && k > 1000)) continue;
        setLongTopk(mode);
        ms[mode] = perCall(() => void kiln.noGrad(() => kiln.topk(x, k, -1, true)));
      }
      rows.push({ shape, dtype, k, ms });
      console.log(`${dtype.padEnd(9)} ${JSON.stringify(shape).padEnd(13)} k ${String(k).padStart(3)}  ${Object.entries(ms).map(([m, v]) => `${m} ${v.toFixed(4)}`).join('  ')}`);
    }
    setLongTopk('auto');
    x.dispose();
  }
}
const out = flag('--json');
if (out) {
  const meta = { date: new Date().toISOString(), host: os.hostname(), command: `node dist/bench/cuda-topk.js ${argv.join(' ')}`.trim(), reps };
  fs.writeFileSync(out, JSON.stringify({ meta, rows }, null, 1));
}
