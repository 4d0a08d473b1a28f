/**
 * Creation ops need no derivative: factories (zeros, rand, arange, ...) take no tensor input, and the
 * `*Like` ops read only their input's shape, dtype and device, never its values. The recording hook
 * still builds a node for a `*Like` op whose input requires grad, so each gets a formula that sends
 * no gradient back (their outputs hold no information about the input's values).
 */
import * as C from '../../ops/defs/creation.js';
import { defineBackward } from '../graph.js';

for (const op of [C.emptyLike, C.zerosLike, C.onesLike, C.fullLike, C.randLike, C.randnLike]) {
  defineBackward(op, (ctx) => ctx.args.map(() => null));
}
