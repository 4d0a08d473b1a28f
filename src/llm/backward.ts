/**
 * Backward formulas derived from the reference compositions: for ops whose gradient is long to
 * write by hand (Sinkhorn-Knopp inside mhcPre, the expert loop of fusedMoe, routing weights), the
 * formula re-runs the op's reference composition of core ops with grad mode on, over detached
 * copies of the inputs that need a gradient, and back-propagates the incoming gradients through
 * it. That is activation recomputation: nothing extra is saved in the forward, the backward costs
 * one more forward of the reference. Correctness rests on the reference matching the kernel,
 * which opcheck checks for every sample (and gradcheck checks these formulas in float64).
 */
import { defineBackward, type GradResult } from '../autograd/graph.js';
import { enableGrad } from '../autograd/grad-mode.js';
import { runBackward } from '../autograd/engine.js';
import { isFloating } from '../tensor/dtype.js';
import { Tensor } from '../tensor/tensor.js';
import { getOp } from '../ops/registry.js';
import { referenceOf } from './reference.js';

function viaReference(opName: string): void {
  const ref = referenceOf(opName);
  if (!ref) throw new Error(`llm backward: op '${opName}' has no reference composition to differentiate`);
  defineBackward(
    getOp(opName),
    (ctx, grads) => {
      const leaves = ctx.args.map((a, i) => (a instanceof Tensor && isFloating(a.dtype) && ctx.needsInputGrad(i) ? a.detach().requiresGrad_() : a));
      const out = enableGrad(() => ref(...leaves));
      const outs = Array.isArray(out) ? out : [out];
      const roots: Tensor[] = [];
      const seeds: Tensor[] = [];
      outs.forEach((o, k) => {
        const g = grads[k];
        if (g && o.requiresGrad) {
          roots.push(o);
          seeds.push(g.to(o.dtype));
        }
      });
      if (roots.length > 0) runBackward(roots, seeds);
      return leaves.map((l, i): GradResult => (l instanceof Tensor && l !== ctx.args[i] ? (l.grad ?? null) : null));
    },
    { save: getOp(opName).args.filter((a) => a.type.startsWith('Tensor')).map((a) => a.name) },
  );
}

for (const op of ['llm.addRmsNorm', 'llm.moeSum', 'llm.fusedMoe', 'llm.topkSoftmax', 'llm.groupedTopk', 'llm.mhcPre', 'llm.mhcPost', 'llm.mhcHeadCollapse']) viaReference(op);
