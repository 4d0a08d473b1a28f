/**
 * Offline checking of generated CUDA C with the toolkit's `nvcc` and `ptxas` (no GPU, no driver):
 * compiles many translation units to PTX, then assembles each PTX for the target, collecting
 * errors, per-kernel register/spill/shared-memory use (`ptxas -v`) and each entry's parameter list
 * as PTX declares it (`.param .u64 ...`), which tests compare with the generator's packed argument
 * layouts. Used by the test suite and scripts/cudagen-ptxas.mjs; the runtime compiles with NVRTC.
 */
import { childProcess, fs, os, path } from '../../../platform/index.js';
import { getOption } from '../../../runtime/config.js';

/** Path of nvcc when it runs (`nvcc --version` succeeds), else null. */
export function findNvcc(): string | null {
  const cand = getOption('KILN_NVCC');
  try {
    childProcess.execFileSync(cand, ['--version'], { stdio: 'pipe' });
    return cand;
  } catch {
    return null;
  }
}

export interface KernelUsage {
  readonly registers: number;
  readonly spillStores: number;
  readonly spillLoads: number;
  readonly stackBytes: number;
  readonly sharedBytes: number;
}

export interface PtxParam {
  /** PTX type: .u64, .u32, .s32, .s64... */
  readonly type: string;
  readonly bytes: number;
}

export interface NvccResult {
  readonly ok: boolean;
  /** Compiler output for failed units (with the unit index). */
  readonly errors: string[];
  readonly usage: Map<string, KernelUsage>;
  readonly params: Map<string, PtxParam[]>;
}

function parsePtxParams(ptx: string, into: Map<string, PtxParam[]>): void {
  const re = /\.entry\s+(\w+)\s*\(([^)]*)\)/g;
  for (const m of ptx.matchAll(re)) {
    const list = m[2]!
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0)
      .map((s) => {
        const t = /\.param\s+\.(\w+)/.exec(s);
        if (!t) throw new Error(`nvcc-check: cannot read PTX parameter '${s}'`);
        const bits = Number(/(\d+)$/.exec(t[1]!)?.[1] ?? NaN);
        return { type: `.${t[1]}`, bytes: bits / 8 };
      });
    into.set(m[1]!, list);
  }
}

function parsePtxas(log: string, into: Map<string, KernelUsage>): void {
  let current: string | null = null;
  let stack = 0;
  let ss = 0;
  let sl = 0;
  for (const line of log.split('\n')) {
    const fn = /Function properties for (\w+)/.exec(line) ?? /Compiling entry function '(\w+)'/.exec(line);
    if (fn) current = fn[1]!;
    const frame = /(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/.exec(line);
    if (frame) {
      stack = Number(frame[1]);
      ss = Number(frame[2]);
      sl = Number(frame[3]);
    }
    const used = /Used (\d+) registers(?:.*?(\d+) bytes smem)?/.exec(line);
    if (used && current) {
      into.set(current, { registers: Number(used[1]), spillStores: ss, spillLoads: sl, stackBytes: stack, sharedBytes: Number(used[2] ?? 0) });
      stack = ss = sl = 0;
    }
  }
}

/**
 * Compiles each source (a full translation unit) for `arch`: nvcc -ptx, then ptxas -v. Units are
 * compiled by one nvcc call each; pass few large units (concatenate kernels behind one prelude)
 * to keep it fast.
 */
export interface NvccOptions {
  /** Run ptxas on the PTX (default true); false stops after nvcc -ptx (front end and PTX generation). */
  readonly assemble?: boolean;
  /**
   * Optimise in cicc (default true). false (-Xcicc -O0) still parses, type-checks and generates
   * PTX for every kernel at about a fifth of the cost: for checking many configs quickly.
   */
  readonly optimize?: boolean;
}

export function nvccCheck(units: readonly string[], arch = 'sm_90', nvcc = findNvcc() ?? 'nvcc', options: NvccOptions = {}): NvccResult {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cudagen-'));
  const errors: string[] = [];
  const usage = new Map<string, KernelUsage>();
  const params = new Map<string, PtxParam[]>();
  try {
    units.forEach((src, i) => {
      const cu = path.join(dir, `unit${i}.cu`);
      const ptx = path.join(dir, `unit${i}.ptx`);
      fs.writeFileSync(cu, src);
      const opt = options.optimize === false ? ['-Xcicc', '-O0'] : [];
      const a = childProcess.spawnSync(nvcc, [`-arch=${arch}`, '-std=c++17', '-ptx', ...opt, '-o', ptx, cu], { encoding: 'utf8' });
      if (a.status !== 0) {
        errors.push(`unit ${i}: nvcc failed:\n${a.stderr}${a.stdout}`);
        return;
      }
      if (/warning/i.test(a.stderr)) errors.push(`unit ${i}: nvcc warnings:\n${a.stderr}`);
      const text = fs.readFileSync(ptx, 'utf8');
      parsePtxParams(text, params);
      if (options.assemble === false) return;
      const b = childProcess.spawnSync(getOption('KILN_PTXAS'), [`-arch=${arch}`, '-v', '-o', path.join(dir, `unit${i}.cubin`), ptx], { encoding: 'utf8' });
      if (b.status !== 0) errors.push(`unit ${i}: ptxas failed:\n${b.stderr}${b.stdout}`);
      parsePtxas(`${b.stderr}\n${b.stdout}`, usage);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { ok: errors.length === 0, errors, usage, params };
}
