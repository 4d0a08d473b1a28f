/** Eager vs the 'kiln' backend on the elementwise workload: medians over reps, speedup. */
import * as kiln from '../src/index.js';
import { getBackend } from '../src/compile/backend.js';
import { trace } from '../src/compile/capture.js';
import '../src/compile/kiln-backend.js';
import type { Tensor } from '../src/tensor/tensor.js';

const f = (x: Tensor): Tensor => {
  let y = x.mul(1.5).add(0.5);
  y = kiln.relu(y).mul(kiln.sigmoid(x));
  y = y.add(kiln.tanh(x.mul(0.5)));
  y = y.sub(kiln.exp(x.neg().mul(x)).mul(0.1));
  return y.mul(2).sub(1);
};

function median(fn: () => void, reps: number): number {
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)]!;
}

for (const n of [1024, 4096]) {
  const x = kiln.randn([n, n]);
  const program = getBackend('kiln').compile(trace(f as (...a: never[]) => unknown, [x]).graph, { mode: 'default', logCode: false });
  const reps = n > 2048 ? 5 : 15;
  const run = (g: () => Tensor): (() => void) => () => g().dispose();
  median(run(() => f(x)), 3);
  median(run(() => program.run([x]) as Tensor), 3);
  const eager = median(run(() => f(x)), reps);
  const compiled = median(run(() => program.run([x]) as Tensor), reps);
  console.log(`elementwise-${n}: eager ${eager.toFixed(1)} ms, compiled ${compiled.toFixed(1)} ms (${program.kernelCount} kernel), speedup ${(eager / compiled).toFixed(2)}x`);
}
