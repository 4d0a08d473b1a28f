/**
 * Verify mode (`kiln.compile(fn, { verify: true })`, KILN_COMPILE_VERIFY=1): every call traces
 * the function again and compares the new trace with the one its program was built from, so what
 * guards cannot see (a reassigned closure variable, a flag read by an `if`, Math.random(), a
 * counter) shows up as an error naming the first difference instead of a silently stale result.
 *
 * Two traces of one function with the same guards allocate values in the same order, so value
 * ids compare directly. Inputs compare by source (argument path; lifted tensor: the same object,
 * or, for tensors the function created while tracing, the same metadata and values), nodes by op
 * and arguments (constants by constKey: -0, NaN and object identity included), then the output.
 */
import { Tensor } from '../tensor/tensor.js';
import type { Trace } from './capture.js';
import { formatSym, outputValues, type Graph, type IRArg, type IRNode, type OutputTree, type ValueId } from './ir.js';
import { constKey } from './passes/util.js';

const CLOSURE_HINT = 'a closed-over value changed (or the function has side effects such as Math.random()); pass it as an argument';

/** How to name values in messages: argument paths, lifted tensors, %id. */
function namer(g: Graph): (id: ValueId) => string {
  const names = new Map<ValueId, string>();
  let k = 0;
  for (const inp of g.inputs) {
    if (inp.source.kind === 'arg') {
      names.set(inp.id, inp.source.path.map((s, i) => (typeof s === 'number' ? (i === 0 ? `arg${s}` : `[${s}]`) : `.${s}`)).join(''));
    } else {
      const t = inp.source.tensor;
      names.set(inp.id, `captured${k++}<${t.dtype}[${t.shape.join(', ')}]>`);
    }
  }
  return (id) => names.get(id) ?? `%${id}`;
}

function fmtArg(a: IRArg, name: (id: ValueId) => string): string {
  switch (a.kind) {
    case 'value':
      return name(a.id);
    case 'list':
      return `[${a.items.map((x) => fmtArg(x, name)).join(', ')}]`;
    case 'const':
      return typeof a.value === 'number' || typeof a.value === 'boolean' || a.value === null || a.value === undefined
        ? String(a.value)
        : typeof a.value === 'string'
          ? JSON.stringify(a.value)
          : Array.isArray(a.value)
            ? JSON.stringify(a.value)
            : `<${(a.value as object).constructor?.name ?? 'object'}>`;
    case 'sym':
      return formatSym(a.expr, name);
    default:
      return a satisfies never;
  }
}

const fmtNode = (n: IRNode, name: (id: ValueId) => string): string => `${n.op}(${n.args.map((a) => fmtArg(a, name)).join(', ')})`;

function argKey(a: IRArg): string {
  switch (a.kind) {
    case 'value':
      return `%${a.id}`;
    case 'list':
      return `[${a.items.map(argKey).join(',')}]`;
    case 'const':
      return constKey(a.value);
    case 'sym':
      return formatSym(a.expr);
    default:
      return a satisfies never;
  }
}

function sameValues(a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join() || a.device.toString() !== b.device.toString()) return false;
  const x = a.toFlatArray();
  const y = b.toFlatArray();
  return x.length === y.length && x.every((v, i) => Object.is(v, y[i]));
}

function treeKey(t: OutputTree): string {
  switch (t.kind) {
    case 'tensor':
      return `%${t.id}`;
    case 'list':
      return `[${t.items.map(treeKey).join(',')}]`;
    case 'object':
      return `{${t.entries.map(([k, v]) => `${k}:${treeKey(v)}`).join(',')}}`;
    case 'const':
      return constKey(t.value);
    default:
      return t satisfies never;
  }
}

/** The first difference between the compiled trace and this call's, in words; null if none. */
export function traceDifference(compiled: Trace, now: Trace): string | null {
  const a = compiled.graph;
  const b = now.graph;
  const nameA = namer(a);
  const nameB = namer(b);
  const n = Math.min(a.inputs.length, b.inputs.length);
  for (let i = 0; i < n; i++) {
    const x = a.inputs[i]!.source;
    const y = b.inputs[i]!.source;
    if (x.kind === 'arg' && y.kind === 'arg') {
      if (x.path.join('/') !== y.path.join('/')) return `input ${i} was ${nameA(a.inputs[i]!.id)} and is now ${nameB(b.inputs[i]!.id)}; ${CLOSURE_HINT}`;
      continue;
    }
    if (x.kind === 'lifted' && y.kind === 'lifted') {
      if (x.tensor === y.tensor) continue;
      const madeA = x.tensor.id >= compiled.startTensorId;
      const madeB = y.tensor.id >= now.startTensorId;
      if (madeA && madeB && sameValues(x.tensor, y.tensor)) continue;
      const what = madeA && madeB ? 'a tensor the function creates has different values' : 'a closed-over tensor variable now holds another tensor';
      return `input ${i} (${nameA(a.inputs[i]!.id)}) is not the tensor the program was built with: ${what}; pass the tensor as an argument`;
    }
    return `input ${i} was ${nameA(a.inputs[i]!.id)} and is now ${nameB(b.inputs[i]!.id)}; ${CLOSURE_HINT}`;
  }
  const m = Math.min(a.nodes.length, b.nodes.length);
  for (let k = 0; k < m; k++) {
    const x = a.nodes[k]!;
    const y = b.nodes[k]!;
    if (x.op !== y.op || x.args.length !== y.args.length || x.args.some((arg, j) => argKey(arg) !== argKey(y.args[j]!))) {
      return `node ${k} was ${fmtNode(x, nameA)} and is now ${fmtNode(y, nameB)} — ${CLOSURE_HINT}`;
    }
  }
  if (a.nodes.length !== b.nodes.length) {
    const extra = a.nodes.length > b.nodes.length ? `node ${m} ${fmtNode(a.nodes[m]!, nameA)} is no longer traced` : `node ${m} ${fmtNode(b.nodes[m]!, nameB)} is new`;
    return `the graph had ${a.nodes.length} nodes and now has ${b.nodes.length}: ${extra} — the function took another path; ${CLOSURE_HINT}`;
  }
  if (a.inputs.length !== b.inputs.length) return `the graph had ${a.inputs.length} inputs and now has ${b.inputs.length}; ${CLOSURE_HINT}`;
  if (treeKey(a.output) !== treeKey(b.output)) {
    const outs = (g: Graph, nm: (id: ValueId) => string) => outputValues(g.output).map(nm).join(', ');
    return `the function returned ${outs(a, nameA) || treeKey(a.output)} and now returns ${outs(b, nameB) || treeKey(b.output)} — ${CLOSURE_HINT}`;
  }
  return null;
}

/** The error verify mode raises for call `call` of `fnName`. */
export function verifyError(fnName: string, call: number, difference: string): Error {
  return new Error(`kiln.compile verify: call ${call} of '${fnName}' traced a different graph than the compiled one: ${difference}`);
}
