/**
 * A scheduled kernel group (lower/schedule.ts) as the CUDA renderer's fused group
 * (kernels/cuda/fused/group.ts): the same nodes, values and operand order, so the renderer writes
 * the text it wrote when it took the compiler's types. A list argument reaches the math table as
 * a constant null (the templates take none); its values still count as the node's inputs.
 */
import type { FusedGroup, FusedNode } from '../../../kernels/cuda/fused/group.js';
import type { ValueId, ValueInfo } from '../../ir.js';
import { nodeInputs } from '../../lower/lower.js';
import { CAST_OPS } from '../../lower/ops.js';
import type { KernelGroup } from '../../lower/schedule.js';

export function fusedGroup(g: KernelGroup, info: (id: ValueId) => ValueInfo): FusedGroup {
  const nodes = g.nodes.map((n): FusedNode => {
    if (n.kind !== 'pointwise' && n.kind !== 'reduction') throw new Error(`kiln cuda codegen: a ${n.kind} node (${n.op}) in a kernel group`);
    return {
      kind: n.kind,
      op: n.op,
      args: n.args.map((a) => (a.kind === 'value' ? { kind: 'value', id: a.id } : { kind: 'const', value: a.kind === 'const' ? a.value : null })),
      inputs: nodeInputs(n),
      outputs: n.outputs,
      ...(n.reduce ? { reduce: { kind: n.reduce.kind, input: n.reduce.input } } : {}),
      cast: CAST_OPS.has(n.op),
    };
  });
  return { kind: g.kind, nodes, rowScalars: g.rowScalars, inputs: g.inputs, outputs: g.outputs, value: info };
}
