#!/usr/bin/env node
/**
 * One sha256 over every CUDA C source the paged-attention generators (v1 + its reduce, v2, v3,
 * reshape_and_cache) emit over a parameter space that covers what the tests and the benchmark use
 * and more, so a refactor of src/kernels/cuda/codegen/paged-attention*.ts can be shown to leave
 * the generated code byte-identical: run it before and after, compare the printed hash and count.
 * Runs against dist/ (build first). No GPU and no driver needed: it only calls the generators.
 *
 *   npm run build && node scripts/paged-attention-sources-hash.mjs [--list]
 *
 * The space (the generators' spec fields; block size, batch, lengths and split counts are launch
 * arguments, not part of the source):
 *   dtype         float32, float16, bfloat16, float64
 *   table / len   int32, int64 (all four pairs)
 *   headDim       1, 7, 16, 32, 40, 64, 80, 96, 128, 256, 512
 *   group         1, 2, 3, 4, 5, 8, 16
 *   align (v2/v3) 1, 2, 4, 8, 16            vec (v1) false, true
 *   unroll (v3)   absent, 1..8 (0 is the same as absent by the spec)
 *   form (v3)     the division form; shift + 32-bit products + ping-pong loop (the launcher's
 *                 default for blocks of 16); shift 0 + 32-bit; ping-pong alone (session 18)
 * Combinations a generator's support check rejects are skipped. Each source is hashed as
 * `<kind>\0<name>\0<params joined by ,>\0<source>\0` in a fixed order, so a change of a kernel's
 * name or parameter list changes the hash too. --list prints a per-kind count and sub-hash.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mod = (p) => import(pathToFileURL(path.join(root, 'dist/src/kernels/cuda/codegen', p)).href);
const P1 = await mod('paged-attention-v1.js');
const P2 = await mod('paged-attention.js');
const P3 = await mod('paged-attention-v3.js');
/** v3's address and loop forms (PagedAttentionSpec.blockShift / index32, PagedAttentionSpecV3.pingpong). */
const V3_FORMS = [{}, { blockShift: 4, index32: true, pingpong: true }, { blockShift: 0, index32: true }, { pingpong: true }];

const DTYPES = ['float32', 'float16', 'bfloat16', 'float64'];
const INTS = ['int32', 'int64'];
const HEAD_DIMS = [1, 7, 16, 32, 40, 64, 80, 96, 128, 256, 512];
const GROUPS = [1, 2, 3, 4, 5, 8, 16];
const ALIGNS = [1, 2, 4, 8, 16];
const UNROLLS = [undefined, 1, 2, 3, 4, 5, 6, 7, 8];

const all = crypto.createHash('sha256');
const perKind = new Map();
function add(kind, k) {
  const text = `${kind}\0${k.name}\0${k.params.join(',')}\0${k.source}\0`;
  all.update(text);
  let e = perKind.get(kind);
  if (!e) perKind.set(kind, (e = { n: 0, h: crypto.createHash('sha256') }));
  e.n++;
  e.h.update(text);
}

for (const dtype of DTYPES) {
  add('v1-reduce', P1.generatePagedReduceV1(dtype));
  for (const slot of INTS) add('reshape', P2.generateReshapeAndCache(dtype, slot));
  for (const tableDtype of INTS) {
    for (const lenDtype of INTS) {
      for (const headDim of HEAD_DIMS) {
        for (const group of GROUPS) {
          const geo = { dtype, tableDtype, lenDtype, headDim, group };
          if (P1.pagedAttentionSupportedV1(geo)) {
            for (const vec of [false, true]) {
              if (vec && P1.pagedVectorBytesV1(dtype, headDim) === 0) continue;
              add('v1', P1.generatePagedAttentionV1({ ...geo, vec }));
            }
          }
          if (!P2.pagedAttentionSupported(geo)) continue;
          for (const align of ALIGNS) {
            add('v2', P2.generatePagedAttention({ ...geo, align }));
            for (const unroll of UNROLLS) {
              for (const form of V3_FORMS) add('v3', P3.generatePagedAttentionV3({ ...geo, align, ...(unroll === undefined ? {} : { unroll }), ...form }));
            }
          }
        }
      }
    }
  }
}

const count = [...perKind.values()].reduce((n, e) => n + e.n, 0);
if (process.argv.includes('--list')) for (const [kind, e] of perKind) console.log(`${kind.padEnd(10)} ${String(e.n).padStart(6)} ${e.h.digest('hex')}`);
console.log(`paged-attention sources: ${count} sha256 ${all.digest('hex')}`);
