/**
 * Huge-page weight memory on the cpu (KILN_CPU_HUGE_PAGES, kernels/cpu/native/huge-pages.ts):
 * the mapping is 2 MiB-aligned, zero-filled and eligible for transparent huge pages (read back
 * from /proc/self/smaps), and unmapped once its ArrayBuffer is collected; a storage moved into it keeps its bytes and the allocator's accounting,
 * and its block is reused by the cache after a free; a Qwen3 model built or converted on the cpu
 * moves its large weights and generates the same greedy tokens as with the option off. Where the
 * machine has no huge pages (not Linux, THP "never", no koffi) the functions must say so and the
 * model must keep working; the checks that need huge pages are skipped there with that reason.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import v8 from 'node:v8';
import vm from 'node:vm';
import { test } from 'node:test';
import * as kiln from '../src/index.js';
import { arrayBufferAddress, hugePageArrayBuffer, hugePageStats, moveStorageToHugePages, HUGE_PAGE_MIN_BYTES } from '../src/kernels/cpu/native/huge-pages.js';
import { acceleratorFor } from '../src/runtime/registry.js';
import { Device } from '../src/runtime/device.js';
import { setOption } from '../src/runtime/config.js';
import { sizeClass } from '../src/runtime/caching-allocator.js';
import type { Tensor } from '../src/tensor/tensor.js';

const probe = hugePageArrayBuffer(HUGE_PAGE_MIN_BYTES);
const skip = typeof probe === 'string' ? `no huge pages here: ${probe}` : false;
const TWO_MIB = 2n * 1024n * 1024n;

/** The /proc/self/smaps fields of the mapping that holds `addr`. */
function smapsOf(addr: bigint): Record<string, string> {
  for (const entry of fs.readFileSync('/proc/self/smaps', 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const m = /^([0-9a-f]+)-([0-9a-f]+)/.exec(entry);
    if (!m || BigInt(`0x${m[1]}`) > addr || addr >= BigInt(`0x${m[2]}`)) continue;
    const fields: Record<string, string> = {};
    for (const line of entry.split('\n').slice(1)) {
      const f = /^(\w+):\s+(.*)$/.exec(line);
      if (f) fields[f[1]!] = f[2]!;
    }
    return fields;
  }
  throw new Error(`no mapping holds 0x${addr.toString(16)}`);
}

function cpuStats(): { allocatedBytes: number; activeAllocations: number; cachedBytes: number } {
  return acceleratorFor(new Device('cpu', 0)).accelerator.allocator(0).stats();
}

test('hugePageArrayBuffer: a zero-filled, 2 MiB-aligned mapping advised for huge pages', { skip }, () => {
  const size = 3 * 1024 * 1024 + 123;
  const before = hugePageStats();
  const buf = hugePageArrayBuffer(size);
  assert.ok(buf instanceof ArrayBuffer, String(buf));
  assert.equal(buf.byteLength, size);
  const addr = arrayBufferAddress(buf);
  assert.equal(addr % TWO_MIB, 0n, `address 0x${addr.toString(16)} is 2 MiB-aligned`);
  const bytes = new Uint8Array(buf);
  assert.ok(bytes.every((b) => b === 0), 'zero-filled');
  bytes.fill(7);
  assert.equal(bytes[size - 1], 7);
  const fields = smapsOf(addr);
  assert.equal(fields.THPeligible, '1', `THPeligible in /proc/self/smaps (${JSON.stringify(fields)})`);
  assert.deepEqual(hugePageStats(), { blocks: before.blocks + 1, bytes: before.bytes + Math.ceil(size / 4096) * 4096 }, 'the mapping counted in whole 4 KiB pages');
  assert.throws(() => hugePageArrayBuffer(0), /size must be a positive integer, got 0/);
});

test('hugePageArrayBuffer: the mapping is unmapped once its ArrayBuffer is collected', { skip }, async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  await new Promise((r) => setTimeout(r, 0));
  const before = hugePageStats();
  let addr = 0n;
  (() => {
    const buf = hugePageArrayBuffer(5 * 1024 * 1024) as ArrayBuffer;
    addr = arrayBufferAddress(buf);
    new Uint8Array(buf).fill(1);
  })();
  assert.equal(hugePageStats().blocks, before.blocks + 1);
  // Finalizers run after a collection, on a later turn: collect and yield until it has run.
  for (let i = 0; i < 50 && hugePageStats().blocks > before.blocks; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(hugePageStats(), before, 'the block was released');
  // (Not checked: that nothing is mapped at its address; any later mmap of the process may reuse it.)
  assert.notEqual(addr, 0n);
});

test('moveStorageToHugePages: the tensor keeps its values and the allocator its accounting; a freed block serves the next allocation of its class', { skip }, () => {
  const n = 3 * 262144 + 5; // 3 MiB of float32 and a bit: one size class of 4 MiB
  const values = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.001) * (i % 7));
  const t = kiln.tensor(values);
  const view = t.narrow(0, 10, 1000);
  const stats0 = cpuStats();
  assert.equal(moveStorageToHugePages(t.storage), true);
  const stats1 = cpuStats();
  assert.equal(stats1.allocatedBytes, stats0.allocatedBytes, 'allocated bytes unchanged');
  assert.equal(stats1.activeAllocations, stats0.activeAllocations, 'live blocks unchanged');
  const ab = t.storage.cpuArrayBuffer();
  assert.equal(arrayBufferAddress(ab) % TWO_MIB, 0n, 'the storage reads the huge-page mapping');
  assert.equal(ab.byteLength, sizeClass(n * 4));
  assert.deepEqual(Array.from(t.toFlatArray().slice(0, 20)), Array.from(values.slice(0, 20)));
  assert.deepEqual(view.toFlatArray(), Array.from(values.slice(10, 1010)), 'a view made before the move reads the moved bytes');
  // float64 sum of the same values against the kernel's sum over the moved storage.
  let ref = 0;
  for (const v of values) ref += v;
  assert.ok(Math.abs((t.sum().item() as number) - ref) <= 1e-3 * (1 + Math.abs(ref)));
  // A second move finds the storage there already; a storage below 2 MiB says why it stays.
  assert.equal(moveStorageToHugePages(t.storage), 'already in huge pages');
  assert.equal(t.storage.cpuArrayBuffer(), ab);
  assert.match(String(moveStorageToHugePages(kiln.zeros([10]).storage)), /smaller than 2097152 bytes/);
  t.dispose();
  view.dispose();
  const again = kiln.empty([n]);
  assert.equal(again.storage.cpuArrayBuffer(), ab, 'the freed huge-page block went to the cache and came back for its class');
  again.dispose();
});

function greedy(on: boolean, dtype: 'float32' | 'bfloat16'): { tokens: number[][]; moved: number } {
  setOption('KILN_CPU_HUGE_PAGES', on);
  try {
    // A tiny Qwen3 whose embedding (tied LM head) is 5 MiB in float32 and 2.5 MiB in bfloat16, the
    // other weights small.
    const config = { ...kiln.models.QWEN3_TINY.toJSON(), vocab_size: 20480 };
    const model = kiln.models.Qwen3ForCausalLM.fromConfig(config, { seed: 3, device: 'cpu' }).eval();
    if (dtype !== 'float32') model.to(dtype);
    const w = model.model.embed_tokens.weight as Tensor;
    const moved = arrayBufferAddress(w.storage.cpuArrayBuffer()) % TWO_MIB === 0n ? 1 : 0;
    // A to() that keeps the storages (same dtype) moves nothing again.
    const before = w.storage.cpuArrayBuffer();
    model.to(dtype);
    assert.equal((model.model.embed_tokens.weight as Tensor).storage.cpuArrayBuffer(), before, `${dtype}: a second to(${dtype}) leaves the weights where they are`);
    const out = kiln.generate(model, [[5, 17, 300, 19000, 42], [1, 2, 3, 4, 5]].map((r) => r.slice()), { maxNewTokens: 12, doSample: false }) as Tensor;
    return { tokens: out.tolist() as number[][], moved };
  } finally {
    setOption('KILN_CPU_HUGE_PAGES', undefined);
  }
}

test('Qwen3 on the cpu: weights of 2 MiB or more move to huge pages when built and after to(); greedy tokens equal with the option off', { skip }, () => {
  for (const dtype of ['float32', 'bfloat16'] as const) {
    const off = greedy(false, dtype);
    const on = greedy(true, dtype);
    assert.equal(off.moved, 0, `${dtype}: option off, the embedding stays in its ArrayBuffer`);
    assert.equal(on.moved, 1, `${dtype}: option on, the embedding moved${dtype === 'float32' ? '' : ' again after to()'}`);
    assert.deepEqual(on.tokens, off.tokens, `${dtype}: the same greedy tokens`);
  }
});

test('kiln info says where cpu model weights live: huge pages by default here, ArrayBuffers with KILN_CPU_HUGE_PAGES=0', { skip }, () => {
  const main = new URL('../src/cli/main.js', import.meta.url).pathname;
  const info = (env: Record<string, string>): { hugePages: boolean; reason: string } => {
    const r = spawnSync(process.execPath, [main, 'info', '--json', '--device', 'cpu'], { encoding: 'utf8', env: { ...process.env, ...env } });
    assert.equal(r.status, 0, r.stderr);
    return (JSON.parse(r.stdout) as { cpuWeights: { hugePages: boolean; reason: string } }).cpuWeights;
  };
  assert.deepEqual(info({}), { hugePages: true, reason: 'transparent huge pages (2 MiB-aligned mappings, MADV_HUGEPAGE)' });
  assert.deepEqual(info({ KILN_CPU_HUGE_PAGES: '0' }), { hugePages: false, reason: 'ArrayBuffers: KILN_CPU_HUGE_PAGES=0' });
});
