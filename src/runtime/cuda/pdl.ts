/**
 * Programmatic dependent launch (PDL, sm_90+). A kernel launched with the launch attribute
 * PROGRAMMATIC_STREAM_SERIALIZATION may start (be scheduled, run its prologue) while the kernel
 * before it in the stream still drains; it must then execute `griddepcontrol.wait` before it reads
 * anything its predecessors wrote or writes anything they may still read. Inside a CUDA graph the
 * capture records the dependency as a programmatic edge, which hides most of the ~1-2 us gap
 * between two small kernels.
 *
 * Safety rule: a kernel gets the attribute only when its own source starts its body with the
 * prologue (checked on the source text by hasPdlPrologue, so a kernel without the wait can never
 * be launched early). The prologue's wait returns at once when the launch had no programmatic
 * dependency, so the same cubin is correct with PDL on or off. Ordering stays transitive: every PDL
 * kernel waits for its predecessor's completion (memory flushed) before doing anything, and it
 * cannot complete before that wait returns, so a later kernel's wait also covers all earlier work.
 *
 * Which launches get the attribute: by default only one that follows a kernel on its stream
 * (CudaStream.lastOpKernel; after a copy, memset or event the edge stays an ordinary one), with
 * KILN_PDL=all every launch of a prologue kernel.
 *
 * On by default (DEFAULT_ON below says why); KILN_PDL=0 keeps the kernels and launches of before
 * (no prologue, no attribute), KILN_PDL=1 or unset turns it on; KILN_PDL=wait is on but never
 * triggers early (measurement). Devices below compute
 * capability 9.0 never get it (and the prologue compiles to nothing there: __CUDA_ARCH__ guard).
 */
import { getOption, optionSource, setOption } from '../config.js';
import { deviceInfo } from './properties.js';

/** Starts the prologue's first line; hasPdlPrologue looks for it. */
const MARKER = '// kiln-pdl:';

/**
 * A kernel body may start with a pre-wait section between these two markers (the GEMV's L2
 * prefetch of its weights, kernels/cuda/gemv.ts under KILN_GEMV_PREFETCH): insertPdlPrologue puts
 * the wait after it, and hasPdlPrologue accepts it only when prefetchSectionSafe does. An L2
 * prefetch before the wait is safe even where the predecessor writes the prefetched memory: it
 * loads nothing into registers, and L2 is the point of coherence, so the loads after the wait see
 * the predecessor's writes (a register load or a store there would not be safe).
 */
export const PREFETCH_BEGIN = '// kiln-pdl-prefetch:';
export const PREFETCH_END = '// kiln-pdl-prefetch-end';

/** The asm instructions a pre-wait section may hold: L2 prefetches and the early trigger. */
const SAFE_ASM = /^(cp\.async\.bulk\.prefetch\.L2\.global|prefetch\.global\.L2|griddepcontrol\.launch_dependents)\b/;

/**
 * Whether a pre-wait section (the text between the markers) does nothing that needs the
 * predecessor's results: every asm statement is an L2 prefetch or the early trigger, and it has no
 * other memory access the emitters use (__ldg, atomics, indexed or dereferenced stores, asm loads).
 * A textual check of what Kiln's own emitters write, not a C parser: anything unexpected is refused,
 * and the kernel then launches without the PDL attribute.
 */
export function prefetchSectionSafe(section: string): boolean {
  for (const m of section.matchAll(/asm\s*(?:volatile\s*)?\(\s*"([^"]*)"/g)) if (!SAFE_ASM.test(m[1]!.trim())) return false;
  if (/\basm\b(?!\s*(?:volatile\s*)?\(\s*")/.test(section)) return false;
  return !/__ldg|__ld[a-z]*\(|atomic|\]\s*[-+*/|&^]?=(?!=)|\*\s*\(|reinterpret_cast|\bmemcpy\b/.test(section);
}

/**
 * Offset just past a leading pre-wait section of the body text `body` (after its end marker's
 * line), 0 when the body does not start with one, -1 when it starts with one that has no end.
 */
function prefetchSectionEnd(body: string): number {
  const lead = body.length - body.trimStart().length;
  if (!body.startsWith(PREFETCH_BEGIN, lead)) return 0;
  const end = body.indexOf(PREFETCH_END, lead);
  if (end < 0) return -1;
  const eol = body.indexOf('\n', end);
  return eol < 0 ? body.length : eol + 1;
}

/**
 * The prologue inserted at the start of every kernel body. A grid of at most `earlyMaxBlocks`
 * blocks triggers its dependents first (`launch_dependents`, uniform over the grid): the next kernel
 * then launches once every block of this one has started, and waits in its own prologue. Larger
 * grids trigger implicitly as each block exits. Measured on the H200 (bench/cuda-pdl.ts, 200-kernel
 * chains in a CUDA graph): the early trigger saves 0.33 us per boundary on a 128-block row op
 * (0.28 without it) and lets cuBLASLt's GEMMs, which cuBLAS launches with PDL, start early
 * (0.22 us per node on a row+GEMM chain against 0.10), but on a 1024-block pointwise kernel it
 * costs (0.12 us saved against 0.38): the waiting blocks of the next grid take the SMs' slots.
 * Hence the device's SM count as the threshold (0: never early). The product of the grid
 * dimensions is formed in 64 bits so a huge grid cannot wrap below the threshold.
 * The marker comment is how hasPdlPrologue recognises the prologue.
 */
export function pdlPrologue(earlyMaxBlocks = 0): string {
  return [
    '',
    `  ${MARKER} wait for the previous kernel (programmatic dependent launch)`,
    '#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900',
    ...(earlyMaxBlocks > 0
      ? [`  if ((unsigned long long)gridDim.x * gridDim.y * gridDim.z <= ${Math.floor(earlyMaxBlocks)}ull) asm volatile("griddepcontrol.launch_dependents;" :::);`]
      : []),
    '  asm volatile("griddepcontrol.wait;" ::: "memory");',
    '#endif',
    '',
  ].join('\n');
}

/**
 * `source` with the prologue at the top of every __global__ function body (the first `{` after
 * `__global__` that comes before any `;`, i.e. a definition, not a declaration), after the body's
 * leading pre-wait section where it has one (PREFETCH_BEGIN). Idempotent: a source that already
 * has the marker is returned unchanged. Pure (no device), for tests.
 */
export function insertPdlPrologue(source: string, earlyMaxBlocks = 0): string {
  if (source.includes(MARKER)) return source;
  const prologue = pdlPrologue(earlyMaxBlocks);
  let out = '';
  let from = 0;
  for (let g = source.indexOf('__global__'); g >= 0; g = source.indexOf('__global__', g + 1)) {
    const brace = source.indexOf('{', g);
    const semi = source.indexOf(';', g);
    if (brace < 0 || (semi >= 0 && semi < brace) || brace < from) continue;
    // A kernel defined inside a macro (lines joined by a trailing backslash, as random-draw.ts's
    // per-dtype kernels) cannot take the multi-line prologue with its #if: it is left without one,
    // and hasPdlPrologue (which finds no kernel of the expanded name in the text) never launches it
    // early. On the H200 the inserted prologue broke that kernel's compile (NVRTC: "expected a
    // declaration") and seeded weights fell back to the host draw.
    const lineEnd = source.indexOf('\n', brace);
    if (source.slice(brace + 1, lineEnd < 0 ? undefined : lineEnd).trimEnd().endsWith('\\')) continue;
    const pre = Math.max(0, prefetchSectionEnd(source.slice(brace + 1)));
    out += source.slice(from, brace + 1 + pre) + prologue;
    from = brace + 1 + pre;
  }
  return out + source.slice(from);
}

/**
 * `source` with the prologue in every kernel when PDL is on for device `index`, else unchanged.
 * This is the one place every Kiln kernel gets it: kernelFromSource (eager kernels) and the
 * compiled programs' launcher call it, so no emitter edits its own strings.
 */
export function withPdlPrologue(source: string, index: number): string {
  if (!pdlEnabled(index)) return source;
  // KILN_PDL=wait: no early trigger at all (for measurement).
  return insertPdlPrologue(source, getOption('KILN_PDL') === 'wait' ? 0 : deviceInfo(index).smCount);
}

/**
 * Whether kernel `name` in `source` begins its body with the PDL prologue (only whitespace before
 * it, or a pre-wait section that prefetchSectionSafe accepts). Anything else (no such kernel, a
 * statement first) answers false: the kernel is then launched without the attribute.
 */
export function hasPdlPrologue(source: string, name: string): boolean {
  const decl = new RegExp(`__global__[^;{]*?\\b${name.replace(/[^A-Za-z0-9_]/g, '')}\\s*\\(`).exec(source);
  if (!decl) return false;
  let i = decl.index + decl[0].length;
  // Skip the parameter list (parentheses may nest in attributes or declarators).
  for (let depth = 1; i < source.length && depth > 0; i++) {
    if (source[i] === '(') depth++;
    else if (source[i] === ')') depth--;
  }
  const brace = source.indexOf('{', i);
  if (brace < 0 || source.slice(i, brace).includes(';')) return false;
  const body = source.slice(brace + 1);
  const pre = prefetchSectionEnd(body);
  if (pre < 0) return false;
  if (pre > 0 && !prefetchSectionSafe(body.slice(0, pre))) return false;
  return body.slice(pre).trimStart().startsWith(MARKER);
}

/**
 * Which prologue kernels get the attribute: 'after-kernel' (the default) only when the last thing
 * enqueued on the stream was a kernel (CudaStream.lastOpKernel), 'all' (KILN_PDL=all) always.
 */
export type PdlPolicy = 'all' | 'after-kernel';

/** Overrides the policy for tests and benchmarks (undefined: back to KILN_PDL); option 'cuda.pdl.policy'. */
export function setPdlPolicy(p: PdlPolicy | undefined): void {
  setOption('cuda.pdl.policy', p);
}

export function pdlPolicy(): PdlPolicy {
  return getOption('cuda.pdl.policy') ?? (getOption('KILN_PDL') === 'all' ? 'all' : 'after-kernel');
}

/**
 * Whether PDL is on when KILN_PDL is unset (KILN_PDL=1, =all or =wait turns it on, =0 off). On since
 * session 16: on the H200 the engine's compiled Qwen3-0.6B decode ran 957 / 1,003 tok/s at batch 1
 * with it against 889 / 888 without, and 5,447 / 5,447 against 5,341 / 5,321 at batch 8 (two
 * alternating reps, bench/results/h200-s16-pdl-2026-12-03.json): a decode step is a chain of ~300
 * small kernels in a CUDA graph, where the programmatic edges hide part of each launch gap. Before,
 * it measured nothing on the benchmark workloads and qwen3-0.6b-forward bf16 compiled 8-11 us slower
 * (1.556-1.558 against 1.547 ms, bench/cuda-pdl-workloads.ts), where almost every Kiln kernel sits
 * between two cuBLASLt GEMMs; that cost (under 1%) is taken for the decode gain.
 */
const DEFAULT_ON = true;

/** Overrides KILN_PDL for tests and benchmarks (undefined: back to the environment); option 'cuda.pdl.enabled'. */
export function setPdlEnabled(on: boolean | undefined): void {
  setOption('cuda.pdl.enabled', on);
  perDevice.clear();
}

const perDevice = new Map<number, boolean>();

/** Whether kernels on device `index` get the prologue and their launches the PDL attribute. */
export function pdlEnabled(index: number): boolean {
  const hit = perDevice.get(index);
  if (hit !== undefined) return hit;
  // KILN_PDL unset reads as its default '0', which DEFAULT_ON (not the declared default) decides.
  const wanted = getOption('cuda.pdl.enabled') ?? (optionSource('KILN_PDL') === 'default' ? DEFAULT_ON : getOption('KILN_PDL') !== '0');
  const on = wanted && Number(deviceInfo(index).computeCapability.split('.')[0]) >= 9;
  perDevice.set(index, on);
  return on;
}
