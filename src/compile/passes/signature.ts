/**
 * The structural signature of a graph: ops, arguments (values renumbered in order of first
 * appearance, constants by value), dtypes, ranks and layout classes, with the sizes of symbolic
 * input dims abstracted to '?'. Two traces of one function at different values of its symbolic
 * dims have the same signature when they differ only in those sizes, and can then share one
 * backend program (backends read sizes from their inputs at run time). Sizes baked into constant
 * arguments (a view to [16, -1]) make signatures differ, so such graphs get their own programs.
 */
import { isChannelsLastStrides, isContiguousStrides } from '../../tensor/layout.js';
import type { Graph, OutputTree, ValueId, ValueInfo } from '../ir.js';
import { argKey, constKey } from './util.js';

function layoutClass(v: ValueInfo): string {
  if (isContiguousStrides(v.shape, v.strides)) return 'c';
  if (isChannelsLastStrides(v.shape, v.strides)) return 'cl';
  return 'o';
}

/**
 * `symbolicDims(inputIndex)` gives the dims of graph input i whose sizes are symbolic.
 */
export function graphSignature(g: Graph, symbolicDims: (inputIndex: number) => ReadonlySet<number> = () => new Set()): string {
  const ids = new Map<ValueId, number>();
  const name = (id: ValueId): number => {
    let k = ids.get(id);
    if (k === undefined) {
      k = ids.size;
      ids.set(id, k);
    }
    return k;
  };
  const parts: string[] = [];
  g.inputs.forEach((inp, i) => {
    const v = g.values.get(inp.id)!;
    const sym = symbolicDims(i);
    const shape = v.shape.map((s, d) => (sym.has(d) ? '?' : String(s))).join(',');
    const src = inp.source.kind === 'arg' ? `arg${JSON.stringify(inp.source.path)}` : 'lifted';
    parts.push(`in %${name(inp.id)} ${src} ${v.dtype} [${shape}] ${layoutClass(v)} ${v.device.toString()}`);
  });
  for (const n of g.nodes) {
    const args = n.args.map((a) => argKey(a, name)).join(';');
    const outs = n.outputs.map((o) => {
      const v = g.values.get(o)!;
      return `%${name(o)}:${v.dtype}/${v.shape.length}/${layoutClass(v)}`;
    });
    parts.push(`${outs.join(',')}=${n.op}(${args})`);
  }
  const out = (t: OutputTree): string => {
    switch (t.kind) {
      case 'tensor':
        return `%${name(t.id)}`;
      case 'list':
        return `[${t.items.map(out).join(',')}]`;
      case 'object':
        return `{${t.entries.map(([k, x]) => `${JSON.stringify(k)}:${out(x)}`).join(',')}}`;
      case 'const':
        return constKey(t.value);
      default:
        return t satisfies never;
    }
  };
  parts.push(`return ${out(g.output)}`);
  return parts.join('\n');
}
