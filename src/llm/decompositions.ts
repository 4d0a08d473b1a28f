/**
 * What `native` means for the compiler: a native library op whose frozen dispatch choice on the
 * node's device is its reference composition is decomposed, at compile time, into core ops the
 * code generator fuses (rmsNorm into the lowering's fused norm, act-and-mul into one pointwise
 * kernel). When the choice is a library kernel (the default), these return null and the node
 * stays an extern call of that kernel, so compiled results equal eager ones bit for bit.
 * Like the core decompositions, they apply to contiguous float32 inputs only (half inputs would
 * round every intermediate of the composition).
 */
import { registerDecomposition, type Decomposition } from '../compile/passes/decompose.js';
import { Val, type GraphBuilder } from '../compile/passes/util.js';
import type { IRNode, ValueId } from '../compile/ir.js';
import { isContiguousStrides } from '../tensor/layout.js';
import { manifestEntry } from '../ops/library/manifest.js';
import { llmChoice } from '../ops/library/policy.js';

function tensorArg(n: IRNode, b: GraphBuilder, i: number): Val | null {
  const a = n.args[i];
  if (a?.kind !== 'value') return null;
  const info = b.info(a.id);
  return info.dtype === 'float32' && isContiguousStrides(info.shape, info.strides) ? new Val(a.id) : null;
}

function constArg(n: IRNode, i: number): unknown {
  const a = n.args[i];
  return a?.kind === 'const' ? a.value : undefined;
}

/** Applies `fn` only where the op is native and the frozen choice for the device is the reference. */
function whenReference(op: string, fn: Decomposition): void {
  registerDecomposition(op, (n, b) => {
    if (manifestEntry(op)?.kind !== 'native') return null;
    const first = n.args.find((a) => a.kind === 'value');
    if (first?.kind !== 'value' || llmChoice(op, b.info(first.id).device.type).kind !== 'reference') return null;
    return fn(n, b);
  });
}

function gated(n: IRNode, b: GraphBuilder, act: (a: Val) => Val): ValueId[] | null {
  const x = tensorArg(n, b, 0);
  if (!x) return null;
  const shape = b.info(x.id).shape;
  const d = shape[shape.length - 1]! / 2;
  return [b.op('mul', act(b.op('narrow', x, -1, 0, d)), b.op('narrow', x, -1, d, d)).id];
}

whenReference('llm.rmsNorm', (n, b) => {
  const x = tensorArg(n, b, 0);
  const w = tensorArg(n, b, 1);
  if (!x || !w) return null;
  const h = b.info(x.id).shape.at(-1)!;
  return [b.op('rmsNorm', x, [h], w, constArg(n, 2) as number).id];
});

whenReference('llm.addRmsNorm', (n, b) => {
  const x = tensorArg(n, b, 0);
  const r = tensorArg(n, b, 1);
  const w = tensorArg(n, b, 2);
  if (!x || !r || !w) return null;
  const s = b.op('add', x, r, 1);
  return [b.op('rmsNorm', s, [b.info(x.id).shape.at(-1)!], w, constArg(n, 3) as number).id, s.id];
});

whenReference('llm.siluAndMul', (n, b) => gated(n, b, (a) => b.op('silu', a)));
whenReference('llm.geluAndMul', (n, b) => gated(n, b, (a) => b.op('gelu', a, constArg(n, 1) as string)));

// Back to the two ops it fuses (the norm rounds to float32 here, a no-op): each then fuses or runs as usual.
whenReference('llm.qkNormRotary', (n, b) => {
  const [q, k, qw, kw] = [0, 1, 2, 3].map((i) => tensorArg(n, b, i));
  const cos = n.args[5];
  const sin = n.args[6];
  if (!q || !k || !qw || !kw || cos?.kind !== 'value' || sin?.kind !== 'value') return null;
  const eps = constArg(n, 4) as number;
  const isNeox = constArg(n, 7) as boolean;
  const d = b.info(q.id).shape.at(-1)!;
  const one = (x: Val, w: Val): ValueId => b.op('llm.applyRotaryEmb', b.op('rmsNorm', x, [d], w, eps), new Val(cos.id), new Val(sin.id), isNeox).id;
  return [one(q, qw), one(k, kw)];
});

whenReference('llm.moeSum', (n, b) => {
  const x = tensorArg(n, b, 0);
  return x ? [b.op('sum', x, [1], false, null).id] : null;
});
