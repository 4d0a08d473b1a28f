/**
 * The op support table of docs/ops.md, made from the op registry: per op, whether each accelerator
 * has a kernel, runs it through a decomposition into other ops, or neither. scripts/op-table.mjs
 * writes the page; test/op-table.test.ts fails when the committed page and the registry disagree,
 * so the table cannot go stale.
 */
import '../../src/index.js';
import { listOps } from '../../src/ops/registry.js';
import type { DeviceType } from '../../src/runtime/device.js';

const DEVICES = ['cpu', 'cuda', 'webgpu'] as const;

export function opTableMarkdown(): string {
  const ops = listOps().sort((a, b) => a.name.localeCompare(b.name));
  const cell = (op: (typeof ops)[number], d: DeviceType): string => (op.kernels.has(d) ? 'kernel' : op.decomposition ? 'decomposed' : '—');
  const count = (d: DeviceType): number => ops.filter((op) => op.kernels.has(d) || op.decomposition).length;
  const lines = [
    '# Ops and where they run',
    '',
    'Generated from the op registry by `node scripts/op-table.mjs` (after `npm run build`);',
    '`test/op-table.test.ts` fails when this page and the registry disagree.',
    '',
    '"kernel": the accelerator has its own kernel; "decomposed": it runs as other ops, where those run (the one',
    'decomposition table, `src/ops/decompositions.ts`); "—": not on that accelerator yet (an error',
    'that names the op and the device). cuda and webgpu numerics are checked on an H200 (the cuda',
    'suite; webgpu through Dawn/Vulkan for the ops its tests cover, which CI also runs on SwiftShader,',
    'a CPU Vulkan driver); `kiln.compile` fuses what the',
    "target's fusion rules take and dispatches the rest to these kernels.",
    '',
    `${ops.length} ops: ${DEVICES.map((d) => `${d} ${count(d)}`).join(', ')}.`,
    '',
    `| op | ${DEVICES.join(' | ')} |`,
    `| --- | ${DEVICES.map(() => '---').join(' | ')} |`,
    ...ops.map((op) => `| \`${op.name}\` | ${DEVICES.map((d) => cell(op, d)).join(' | ')} |`),
    '',
  ];
  return lines.join('\n');
}
