/**
 * Device backward kernels of library ops: an accelerator's kernel library may register, per (op,
 * device type), a function computing the op's input gradients directly (e.g. the cuda rmsNorm
 * backward kernels). The op's backward formula (src/autograd/formulas/llm.ts) calls it when one is
 * registered for the device of the saved input, and otherwise runs its composition of core ops.
 * A plain Map lookup: nothing here can break capture.
 */
import type { Tensor } from '../../tensor/tensor.js';

/** grads: the outputs' incoming gradients; args: the op's arguments; needs: which inputs need one. */
export type BackwardKernel = (grads: readonly (Tensor | null)[], args: readonly unknown[], needs: readonly boolean[]) => (Tensor | null)[];

const kernels = new Map<string, BackwardKernel>();

export function registerBackwardKernel(op: string, device: string, fn: BackwardKernel): void {
  const key = `${op}@${device}`;
  if (kernels.has(key)) throw new Error(`registerBackwardKernel: op '${op}' already has a backward kernel for device ${device}`);
  kernels.set(key, fn);
}

export function backwardKernel(op: string, device: string): BackwardKernel | undefined {
  return kernels.get(`${op}@${device}`);
}
