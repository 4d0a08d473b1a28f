// Per-call wall time of the ops of a cpu decode step at Qwen3-0.6B's batch-1 shapes (issue #17,
// session 19), bfloat16: tiny-weight linear (the fixed cost of a GEMV call), addRmsNorm,
// qkNormRotaryCache, pagedAttention at contexts 20 / 100 / 400 / 2000 (KILN_CPU_PAGED_SPLIT on and
// off at 400 and 2000), view. Medians of 7 rounds.
//   node scripts/device/cpu-op-costs.mjs
import * as kiln from '../../dist/src/index.js';
import { setOption } from '../../dist/src/runtime/config.js';
const L = kiln.llm;
const dt = 'bfloat16';
const nb = 160, bs = 16;
const x = kiln.randn([1, 1024]).to(dt), r = kiln.randn([1, 1024]).to(dt), w = kiln.ones([1024]).to(dt);
const wTiny = kiln.randn([16, 1024]).to(dt);
const q = kiln.randn([1, 16, 128]).to(dt), k = kiln.randn([1, 8, 128]).to(dt), v = kiln.randn([1, 8, 128]).to(dt);
const qw = kiln.ones([128]).to(dt), kw = kiln.ones([128]).to(dt);
const cos = kiln.randn([1, 1, 128]).to(dt), sin = kiln.randn([1, 1, 128]).to(dt);
const kc = kiln.randn([nb, bs, 8, 128]).to(dt), vc = kiln.randn([nb, bs, 8, 128]).to(dt);
const slots = kiln.tensor([99], { dtype: 'int32' });
const tables = kiln.tensor([Array.from({ length: 128 }, (_, i) => i)], { dtype: 'int32' });
const lens = Object.fromEntries([20, 100, 400, 2000].map((c) => [c, kiln.tensor([c], { dtype: 'int32' })]));
const unsplit = (f) => () => { setOption('KILN_CPU_PAGED_SPLIT', false); try { f(); } finally { setOption('KILN_CPU_PAGED_SPLIT', undefined); } };
const cases = {
  'linear 16x1024': () => kiln.nn.functional.linear(x, wTiny).dispose(),
  addRmsNorm: () => { const o = L.addRmsNorm(x, r, w, 1e-6); o.out.dispose(); o.residual.dispose(); },
  qkNormRotaryCache: () => L.qkNormRotaryCache(q, k, v, qw, kw, 1e-6, cos, sin, true, kc, vc, slots).q.dispose(),
  'pagedAttention ctx 20': () => L.pagedAttention(q, kc, vc, tables, lens[20], 0.088).dispose(),
  'pagedAttention ctx 100': () => L.pagedAttention(q, kc, vc, tables, lens[100], 0.088).dispose(),
  'pagedAttention ctx 400': () => L.pagedAttention(q, kc, vc, tables, lens[400], 0.088).dispose(),
  'pagedAttention ctx 400 unsplit': unsplit(() => L.pagedAttention(q, kc, vc, tables, lens[400], 0.088).dispose()),
  'pagedAttention ctx 2000': () => L.pagedAttention(q, kc, vc, tables, lens[2000], 0.088).dispose(),
  'pagedAttention ctx 2000 unsplit': unsplit(() => L.pagedAttention(q, kc, vc, tables, lens[2000], 0.088).dispose()),
  view: () => x.view([1, 1, 1024]),
};
const res = {};
for (const [name, f] of Object.entries(cases)) {
  for (let i = 0; i < 300; i++) f();
  const us = [];
  for (let rd = 0; rd < 7; rd++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 500; i++) f();
    us.push(Number(process.hrtime.bigint() - t0) / 500 / 1000);
  }
  us.sort((a, b) => a - b);
  res[name] = us[3];
  console.log(`${name.padEnd(24)} ${us[3].toFixed(2)} us`);
}
