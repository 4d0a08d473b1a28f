/**
 * nn.LSTM and nn.GRU (torch.nn), multi-layer, optionally bidirectional, with PyTorch's parameter
 * names (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse), gate order (LSTM i, f,
 * g, o; GRU r, z, n) and initialisation U(-1/sqrt(H), 1/sqrt(H)), so state dicts load both ways.
 *
 * The recurrence is written with ordinary differentiable ops (linear, sigmoid, tanh, mul, add), so
 * autograd and kiln.compile (which unrolls the loop into one graph per sequence length) need nothing
 * of their own. Per layer and direction the input projection of every time step is one linear over
 * [T, N, I]; only the hidden projection runs step by step. proj_size is not supported.
 *
 * forward returns objects rather than torch's tuples: LSTM { output, h, c }, GRU { output, h },
 * with h and c [numLayers * numDirections, N, H] (layer-major, forward before reverse), and the
 * initial state is passed the same way ({ h, c } / { h }), so a state can be fed back as is.
 */
import { add } from '../../api/core.js';
import { cat, stack } from '../../api/indexing.js';
import { empty, zeros } from '../../api/creation.js';
import { linear } from '../../api/linalg.js';
import { dropout } from '../../api/nn.js';
import { mul, sigmoid, sub, tanh } from '../../api/pointwise.js';
import { checkOptionKeys, keysOf } from '../../runtime/option-keys.js';
import { fmtShape, shapeEquals } from '../../tensor/layout.js';
import type { Tensor } from '../../tensor/tensor.js';
import { uniform_ } from '../init.js';
import { Module, Parameter } from '../module.js';
import { LAYER_KEYS, type LayerOptions } from './basic.js';

export interface RNNOptions extends LayerOptions {
  /** Stacked layers (default 1). */
  numLayers?: number;
  /** Biases b_ih and b_hh (default true). */
  bias?: boolean;
  /** Input and output are [N, T, *] (default false: [T, N, *]); states stay [layers * dirs, N, H]. */
  batchFirst?: boolean;
  /** Dropout on the outputs of every layer but the last, while training (default 0). */
  dropout?: number;
  /** Also run each layer backwards in time and concatenate (default false). */
  bidirectional?: boolean;
}

const RNN_KEYS = [...LAYER_KEYS, ...keysOf<Omit<RNNOptions, keyof LayerOptions>>({ numLayers: true, bias: true, batchFirst: true, dropout: true, bidirectional: true })];

interface Weights {
  wih: Tensor;
  whh: Tensor;
  bih: Tensor | null;
  bhh: Tensor | null;
}

function describe(t: Tensor): string {
  return `${fmtShape(t.shape)} ${t.dtype}`;
}

/** Shared parameters, layout and the layer/direction loop; subclasses give the cell. */
abstract class RNNBase extends Module {
  readonly numLayers: number;
  readonly bias: boolean;
  readonly batchFirst: boolean;
  readonly dropout: number;
  readonly bidirectional: boolean;
  protected abstract readonly owner: string;

  constructor(
    readonly inputSize: number,
    readonly hiddenSize: number,
    gates: number,
    options: RNNOptions,
    name: string,
  ) {
    super();
    checkOptionKeys(`nn.${name}`, options, RNN_KEYS);
    for (const [k, v] of [['inputSize', inputSize], ['hiddenSize', hiddenSize], ['numLayers', options.numLayers ?? 1]] as const) {
      if (!Number.isInteger(v) || v <= 0) throw new Error(`nn.${name}: ${k} must be a positive integer, got ${v}`);
    }
    this.numLayers = options.numLayers ?? 1;
    this.bias = options.bias ?? true;
    this.batchFirst = options.batchFirst ?? false;
    this.dropout = options.dropout ?? 0;
    if (!(this.dropout >= 0 && this.dropout <= 1)) throw new Error(`nn.${name}: dropout must be in [0, 1], got ${this.dropout}`);
    this.bidirectional = options.bidirectional ?? false;
    const o = { dtype: options.dtype, device: options.device };
    const bound = 1 / Math.sqrt(hiddenSize);
    const param = (shape: number[]): Parameter => {
      const p = new Parameter(empty(shape, o));
      if (options.init ?? true) uniform_(p, -bound, bound, options.generator);
      return p;
    };
    const self = this as unknown as Record<string, Parameter>;
    // Registration order is torch's (_flat_weights_names): per layer, per direction, w_ih w_hh b_ih b_hh.
    for (let l = 0; l < this.numLayers; l++) {
      const inSize = l === 0 ? inputSize : hiddenSize * this.numDirections;
      for (const suffix of this.bidirectional ? ['', '_reverse'] : ['']) {
        self[`weight_ih_l${l}${suffix}`] = param([gates * hiddenSize, inSize]);
        self[`weight_hh_l${l}${suffix}`] = param([gates * hiddenSize, hiddenSize]);
        if (this.bias) {
          self[`bias_ih_l${l}${suffix}`] = param([gates * hiddenSize]);
          self[`bias_hh_l${l}${suffix}`] = param([gates * hiddenSize]);
        }
      }
    }
  }

  get numDirections(): number {
    return this.bidirectional ? 2 : 1;
  }

  private weights(l: number, reverse: boolean): Weights {
    const s = reverse ? '_reverse' : '';
    const self = this as unknown as Record<string, Tensor | undefined>;
    return { wih: self[`weight_ih_l${l}${s}`]!, whh: self[`weight_hh_l${l}${s}`]!, bih: self[`bias_ih_l${l}${s}`] ?? null, bhh: self[`bias_hh_l${l}${s}`] ?? null };
  }

  /** One step: xProj = W_ih x_t + b_ih [N, G * H]; states [N, H] each; returns the new states (h first). */
  protected abstract cell(xProj: Tensor, states: Tensor[], w: Weights): Tensor[];

  /** Runs every layer and direction; `init` are the initial states, each [L * D, N, H] (or [L * D, H] unbatched). */
  protected run(input: Tensor, init: (Tensor | null | undefined)[], stateNames: string[]): { output: Tensor; states: Tensor[] } {
    const name = this.owner;
    const unbatched = input.ndim === 2;
    if ((input.ndim !== 2 && input.ndim !== 3) || input.shape.at(-1) !== this.inputSize) {
      throw new Error(`${name}: 'input' must be ${this.batchFirst ? '[N, T, inputSize]' : '[T, N, inputSize]'} or [T, inputSize] with inputSize ${this.inputSize}, got ${describe(input)}`);
    }
    // To [T, N, I].
    let x = unbatched ? input.unsqueeze(1) : this.batchFirst ? input.transpose(0, 1) : input;
    const T = x.shape[0]!;
    const N = x.shape[1]!;
    const H = this.hiddenSize;
    const LD = this.numLayers * this.numDirections;
    const initial = init.map((s, k) => {
      if (s === null || s === undefined) return null;
      const want = unbatched ? [LD, H] : [LD, N, H];
      if (!shapeEquals(s.shape, want)) throw new Error(`${name}: initial state '${stateNames[k]}' must be ${fmtShape(want)} (numLayers * numDirections, N, hiddenSize), got ${describe(s)} for input ${describe(input)}`);
      if (s.dtype !== input.dtype) throw new TypeError(`${name}: initial state '${stateNames[k]}' is ${describe(s)}, 'input' ${describe(input)}: dtypes must match`);
      return unbatched ? s.unsqueeze(1) : s;
    });
    if (T === 0) throw new Error(`${name}: 'input' has no time steps (${describe(input)})`);
    const finals: Tensor[][] = init.map(() => []);
    for (let l = 0; l < this.numLayers; l++) {
      const outs: Tensor[] = [];
      for (let d = 0; d < this.numDirections; d++) {
        const w = this.weights(l, d === 1);
        const idx = l * this.numDirections + d;
        let states = initial.map((s) => (s ? s.select(0, idx) : zeros([N, H], { dtype: x.dtype, device: x.device })));
        const xProj = linear(x, w.wih, w.bih); // [T, N, G * H]
        const hs: Tensor[] = new Array<Tensor>(T);
        for (let s = 0; s < T; s++) {
          const t = d === 1 ? T - 1 - s : s;
          states = this.cell(xProj.select(0, t), states, w);
          hs[t] = states[0]!;
        }
        outs.push(stack(hs));
        states.forEach((st, k) => finals[k]!.push(st));
      }
      x = outs.length === 1 ? outs[0]! : cat(outs, -1);
      if (l < this.numLayers - 1 && this.dropout > 0 && this.training) x = dropout(x, this.dropout, true);
    }
    const output = unbatched ? x.squeeze(1) : this.batchFirst ? x.transpose(0, 1) : x;
    const states = finals.map((f) => (unbatched ? stack(f).squeeze(1) : stack(f)));
    return { output, states };
  }
}

export interface LSTMState {
  h?: Tensor | null;
  c?: Tensor | null;
}

export interface LSTMOutput {
  /** [T, N, D * H] ([N, T, D * H] batchFirst; [T, D * H] unbatched): the last layer's h at every step. */
  output: Tensor;
  /** Final hidden state of every layer and direction, [numLayers * D, N, H]. */
  h: Tensor;
  /** Final cell state, [numLayers * D, N, H]. */
  c: Tensor;
}

/**
 * i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh); c' = sigmoid(f) c + sigmoid(i) tanh(g);
 * h' = sigmoid(o) tanh(c').
 */
export class LSTM extends RNNBase {
  protected readonly owner = 'nn.LSTM';

  constructor(inputSize: number, hiddenSize: number, options: RNNOptions = {}) {
    super(inputSize, hiddenSize, 4, options, 'LSTM');
  }

  protected cell(xProj: Tensor, [h, c]: Tensor[], w: Weights): Tensor[] {
    const gates = add(xProj, linear(h!, w.whh, w.bhh));
    const H = this.hiddenSize;
    const i = sigmoid(gates.narrow(-1, 0, H));
    const f = sigmoid(gates.narrow(-1, H, H));
    const g = tanh(gates.narrow(-1, 2 * H, H));
    const o = sigmoid(gates.narrow(-1, 3 * H, H));
    const c2 = add(mul(f, c!), mul(i, g));
    return [mul(o, tanh(c2)), c2];
  }

  forward(input: Tensor, state: LSTMState = {}): LSTMOutput {
    const { output, states } = this.run(input, [state.h, state.c], ['h', 'c']);
    return { output, h: states[0]!, c: states[1]! };
  }
}

export interface GRUOutput {
  /** [T, N, D * H] ([N, T, D * H] batchFirst; [T, D * H] unbatched). */
  output: Tensor;
  /** Final hidden state of every layer and direction, [numLayers * D, N, H]. */
  h: Tensor;
}

/**
 * r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r * h_n), h' = (1 - z) n + z h,
 * where x_* = W_i* x + b_i* and h_* = W_h* h + b_h* (b_hn stays inside r * (...), as torch).
 */
export class GRU extends RNNBase {
  protected readonly owner = 'nn.GRU';

  constructor(inputSize: number, hiddenSize: number, options: RNNOptions = {}) {
    super(inputSize, hiddenSize, 3, options, 'GRU');
  }

  protected cell(xProj: Tensor, [h]: Tensor[], w: Weights): Tensor[] {
    const hp = linear(h!, w.whh, w.bhh);
    const H = this.hiddenSize;
    const r = sigmoid(add(xProj.narrow(-1, 0, H), hp.narrow(-1, 0, H)));
    const z = sigmoid(add(xProj.narrow(-1, H, H), hp.narrow(-1, H, H)));
    const n = tanh(add(xProj.narrow(-1, 2 * H, H), mul(r, hp.narrow(-1, 2 * H, H))));
    // (1 - z) n + z h = n + z (h - n)
    return [add(n, mul(z, sub(h!, n)))];
  }

  forward(input: Tensor, state: { h?: Tensor | null } = {}): GRUOutput {
    const { output, states } = this.run(input, [state.h], ['h']);
    return { output, h: states[0]! };
  }
}
