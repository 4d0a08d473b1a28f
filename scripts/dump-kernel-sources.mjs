#!/usr/bin/env node
/**
 * Dumps every kernel source Kiln generates for the benchmark workloads and the LLM library, so a
 * refactor can be checked to leave generated code byte-identical (compare two dumps with
 * scripts/compare-kernel-sources.mjs). Runs against dist/ (build first); src/ is not touched.
 *
 *   npx tsc -p tsconfig.json
 *   node scripts/dump-kernel-sources.mjs OUT_DIR [--fake-cuda DIR] [--runs cuda,cpu-native,cpu-wasm,cpu-js]
 *        [--sizes tiny,cpu,full] [--cpu-sizes tiny] [--qwen-layers 2] [--no-autotune] [--keep-temp]
 *   node scripts/compare-kernel-sources.mjs OLD_DIR NEW_DIR [--diff]
 *
 * --fake-cuda DIR (default /tmp/kiln-fake-cuda-dump) is where scripts/fake-cuda/build.sh puts the
 * fake libraries; they are (re)built there when missing or older than fake-cuda.c. Needs a C
 * compiler (cc/gcc/clang on PATH, or KILN_CC: the wrapper below calls it).
 *
 * WHAT IS CAPTURED (kinds; each unique text/binary once, as OUT_DIR/<kind>-<sha256 first 16 hex>.<ext>)
 *   cuda       .cu   every CUDA C source handed to NVRTC (nvrtcCompileProgram), byte for byte.
 *   cuda-unit  .txt  one per NVRTC compile: program name, options, sha256 of the source, so a change
 *                    of options (or of the name) with the same source shows up too.
 *   c          .c    every C file handed to the C compiler (native cpu kernels, compiled C kernels,
 *                    and the toolchain's fixed probe programs).
 *   js         .js   every `new Function(...)` / `Function(...)` the process constructs, written as V8
 *                    compiles it: `(function anonymous(<params>\n) {\n<body>\n})` (cpu compiler's JS
 *                    kernels, eager pointwise loops, the compile pool's syntax check of the same text).
 *   wasm       .wasm every byte buffer passed to WebAssembly.Module / compile / instantiate / validate
 *                    (compiled Wasm kernels, the Wasm GEMM and its probes).
 *
 * HOW
 *   The script re-runs itself as child processes ("runs"), each with a fresh empty KILN_CACHE_DIR (so
 *   nothing comes from a disk cache) and KILN_COMPILE_WORKERS=0 (everything in-process, so the
 *   in-process hooks see it and nothing runs concurrently), every other KILN_* variable removed and
 *   KILN_NUM_THREADS=2 fixed (the default follows the load average):
 *     cuda        device 'cuda' on scripts/fake-cuda (do-nothing libcuda/libnvrtc/libcublasLt built with
 *                 FAKE_CUDA_DUMP_DIR support: its nvrtcCompileProgram writes each source and its
 *                 options to a file). Numbers are meaningless; the sources are real (sm_90, H200).
 *     cpu-native  device 'cpu', automatic cpu path (native C where a compiler works)
 *     cpu-wasm    device 'cpu', KILN_CPU_PATH=wasm
 *     cpu-js      device 'cpu', KILN_CPU_PATH=js
 *   Hooks: NVRTC through FAKE_CUDA_DUMP_DIR (C level, any thread); C through KILN_CC = a wrapper
 *   script that copies each *.c argument (named by sha256sum) and then execs the real compiler;
 *   JS and Wasm by replacing globalThis.Function and WebAssembly.{Module,compile,instantiate,validate}
 *   with transparent wrappers in the child before Kiln is imported.
 *   Work in each run, in this order (all seeded; the order is fixed):
 *     workloads   every src/bench/workloads.ts workload, dtypes float32 and bfloat16, at the sizes of
 *                 --sizes on cuda (default tiny, cpu, full: only the host builds the inputs, so the
 *                 real benchmark shapes are cheap) and --cpu-sizes on the cpu (default tiny: the cpu
 *                 compiler's kernels are shape-generic, the 'cpu' size added no source and 40 s);
 *                 qwen3-0.6b-forward only at 'tiny' (its 'cpu'/'full' size is the 28-layer 0.6B model:
 *                 3500 NVRTC units that differ only in the kernel numbers, 45 s). Each: what `kiln
 *                 bench` runs (benchWorkload of src/bench/harness.ts with 1 warm-up and 1 repetition:
 *                 eager, kiln.compile(forward, { name }) in mode 'default', the parity check); then
 *                 mode 'max-autotune' (unless --no-autotune), called 3 times under noGrad; at 'tiny'
 *                 also kiln.compile of mean(forward(x)^2) with backward() (training kernels).
 *     qwen3       cuda only: Qwen3-0.6B's real shapes with --qwen-layers of its 28 layers (default 2),
 *                 ids [1, 16] and [1, 128], float32 and bfloat16: as above (bench, max-autotune).
 *     llm         kiln.llm.opcheck of every library op on the run's device with the test samples
 *                 (test/samples/llm.ts: all implementations, meta, dynamic T, float64 gradcheck);
 *                 forward + backward of every sample with a gradient in float32 and bfloat16; the
 *                 model-sized shapes of test/llm-cuda.test.ts / llm-moe-cuda.test.ts (norms, act-and-
 *                 mul, rope, qkNormRotary, qkNormRotaryCache, linearSiluAndMul, addRmsNormLinear, topk, grouped topk, moeSum, fusedMoe, mHC) forward, and
 *                 rmsNorm / addRmsNorm / act-and-mul backward; kiln.compile (fullgraph) of the graphs
 *                 of test/llm-compile.test.ts (norm-act-rope, a Qwen3-MoE block, an mHC block) and of
 *                 a core-op rmsNorm + silu-mul pattern the rewrites turn into library ops, float32 and
 *                 bfloat16.
 *   Errors in a step are recorded (run-info.json, stderr) and the next step runs; they are part of
 *   the expected output (fake cuda returns zeros, so e.g. opcheck's agreement checks fail there).
 *
 * OUTPUT (OUT_DIR is emptied of earlier dump files first)
 *   <kind>-<hash16>.<ext>  the captured files
 *   manifest.json   { format, counts: {kind: n}, entries: [{kind, hash (full sha256), bytes, file}] }
 *                   sorted by kind then hash: the part compare-kernel-sources.mjs compares, and
 *                   byte-identical between two dumps of the same generated code.
 *   origins.json    file -> the steps ("run/size/dtype/workload/mode", "run/llm/...") in which it was
 *                   first generated in each run (for explaining a difference; in-memory caches mean a
 *                   kernel is generated once per run, so later steps that reuse it are not listed)
 *   run-info.json   commit, node, compiler, timings and errors per step (not compared)
 *
 * DETERMINISM: two dumps at one commit give byte-identical manifest.json and origins.json (checked
 * at 0246949 = 443d018 + these scripts: 2941 files). No normalisation was needed: no temp path,
 * counter or timing reaches a captured source (the cc task writes sources under a fixed file name;
 * the wrapper hashes content only; fake cuda times every candidate at 1.0 ms, and the cpu compiler's
 * autotuning chooses among candidates whose sources are all generated anyway). The C and Wasm
 * sources depend on the host (compiler version, CPU features such as avx512f, OpenMP), so compare
 * dumps made on one machine. Kernel names carry the compiled graph's node numbers (kiln_k48_...), so
 * a refactor that renumbers nodes changes those sources in the name only: --diff shows it.
 * Costs about 2.5 minutes wall (1.5 min CPU) on a shared 2-core machine with the defaults:
 * cuda 60 s, cpu-native 60 s, cpu-wasm 10 s, cpu-js 11 s.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SCRIPT), '..');
const DIST = path.join(ROOT, 'dist');
const ALL_RUNS = ['cuda', 'cpu-native', 'cpu-wasm', 'cpu-js'];
const KINDS = { cuda: 'cu', 'cuda-unit': 'txt', c: 'c', js: 'js', wasm: 'wasm' };
const HASH_PREFIX = 16;
const sha256 = (data) => createHash('sha256').update(data).digest('hex');

if (process.argv[2] === '--child') await child(JSON.parse(process.argv[3]));
else main();

// =============================================================================================
// parent

function usage(msg) {
  if (msg) console.error(`dump-kernel-sources: ${msg}`);
  console.error('usage: node scripts/dump-kernel-sources.mjs OUT_DIR [--fake-cuda DIR] [--runs cuda,cpu-native,cpu-wasm,cpu-js] [--sizes tiny,cpu,full] [--cpu-sizes tiny] [--qwen-layers 2] [--no-autotune] [--keep-temp]');
  process.exit(2);
}

function parseArgs(argv) {
  const o = { out: undefined, fakeCuda: '/tmp/kiln-fake-cuda-dump', runs: ALL_RUNS, sizes: ['tiny', 'cpu', 'full'], cpuSizes: ['tiny'], qwenLayers: 2, autotune: true, keepTemp: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => argv[++i] ?? usage(`${a} needs a value`);
    if (a === '--fake-cuda') o.fakeCuda = path.resolve(val());
    else if (a === '--runs') o.runs = val().split(',').filter(Boolean);
    else if (a === '--sizes') o.sizes = val().split(',').filter(Boolean);
    else if (a === '--cpu-sizes') o.cpuSizes = val().split(',').filter(Boolean);
    else if (a === '--qwen-layers') o.qwenLayers = Number(val());
    else if (a === '--no-autotune') o.autotune = false;
    else if (a === '--keep-temp') o.keepTemp = true;
    else if (a.startsWith('-')) usage(`unknown option ${a}`);
    else if (o.out === undefined) o.out = path.resolve(a);
    else usage(`unexpected argument ${a}`);
  }
  if (!o.out) usage('OUT_DIR is required');
  for (const r of o.runs) if (!ALL_RUNS.includes(r)) usage(`unknown run '${r}' (known: ${ALL_RUNS.join(', ')})`);
  for (const s of [...o.sizes, ...o.cpuSizes]) if (!['tiny', 'cpu', 'full'].includes(s)) usage(`unknown size '${s}'`);
  if (!Number.isInteger(o.qwenLayers) || o.qwenLayers < 0) usage('--qwen-layers takes a whole number (0: none)');
  return o;
}

function which(name) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The real C compiler the wrapper calls: KILN_CC if the caller set one, else cc / gcc / clang on PATH. */
function realCompiler() {
  const env = process.env.KILN_CC?.trim();
  const found = env ? (env.includes('/') ? env : which(env)) : (which('cc') ?? which('gcc') ?? which('clang'));
  if (!found) throw new Error('dump-kernel-sources: no C compiler (cc, gcc, clang) on PATH; the native cpu path needs one');
  return path.resolve(found);
}

function ccWrapper(dir, dumpDir, compiler) {
  const file = path.join(dir, 'cc');
  // Copies every *.c argument into the dump (content-named, temp file + rename), then runs the
  // real compiler with the same arguments. `--version` etc. pass straight through.
  fs.writeFileSync(
    file,
    `#!/bin/sh
for a in "$@"; do
  case "$a" in
    *.c) if [ -f "$a" ]; then
           h=$(sha256sum "$a" | cut -c1-64)
           t="${dumpDir}/.tmp-$$-$h"
           cp "$a" "$t" && mv -f "$t" "${dumpDir}/c-$h.c"
         fi ;;
  esac
done
exec '${compiler}' "$@"
`,
    { mode: 0o755 },
  );
  return file;
}

function ensureFakeCuda(dir) {
  const lib = path.join(dir, 'lib64');
  const libs = ['libcuda.so.1', 'libnvrtc.so.13', 'libcublasLt.so.13'];
  const src = path.join(ROOT, 'scripts/fake-cuda/fake-cuda.c');
  const stale = libs.some((l) => !fs.existsSync(path.join(lib, l)) || fs.statSync(path.join(lib, l)).mtimeMs < fs.statSync(src).mtimeMs);
  if (stale) {
    const r = spawnSync('bash', [path.join(ROOT, 'scripts/fake-cuda/build.sh'), dir], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`dump-kernel-sources: building fake cuda failed:\n${r.stderr}${r.stdout}`);
  }
  return lib;
}

function gitCommit() {
  const r = spawnSync('git', ['-C', ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' });
  const dirty = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' });
  return r.status === 0 ? `${r.stdout.trim()}${dirty.stdout.trim() ? ' (with uncommitted changes)' : ''}` : 'unknown';
}

function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(path.join(DIST, 'src/index.js'))) usage(`no ${path.relative(ROOT, DIST)}/src/index.js: build first (npx tsc -p tsconfig.json)`);
  if (!fs.existsSync(path.join(DIST, 'test/samples/llm.js'))) usage('no dist/test/samples/llm.js: build first (npx tsc -p tsconfig.json)');
  const t0 = performance.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-dump-'));
  const compiler = realCompiler();
  const fakeLib = o.runs.includes('cuda') ? ensureFakeCuda(o.fakeCuda) : undefined;
  const info = { commit: gitCommit(), node: process.version, compiler, compilerVersion: spawnSync(compiler, ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0], options: { runs: o.runs, sizes: o.sizes, cpuSizes: o.cpuSizes, qwenLayers: o.qwenLayers, autotune: o.autotune }, runs: {} };
  const origins = new Map(); // file -> steps
  const files = new Map(); // file -> { kind, hash, bytes, data }

  const add = (kind, data, steps) => {
    const hash = sha256(data);
    const file = `${kind}-${hash.slice(0, HASH_PREFIX)}.${KINDS[kind]}`;
    const prev = files.get(file);
    if (prev && prev.hash !== hash) throw new Error(`dump-kernel-sources: hash prefix collision on ${file}`);
    if (!prev) files.set(file, { kind, hash, bytes: data.length, data });
    const list = origins.get(file) ?? [];
    for (const s of steps) if (!list.includes(s)) list.push(s);
    origins.set(file, list);
    return hash;
  };

  for (const run of o.runs) {
    const rt0 = performance.now();
    const dir = path.join(tmp, run);
    const dump = path.join(dir, 'dump');
    const cache = path.join(dir, 'cache');
    fs.mkdirSync(dump, { recursive: true });
    fs.mkdirSync(cache, { recursive: true });
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!/^(KILN_|FAKE_CUDA_|CUDA_HOME$|CUDA_PATH$|LD_LIBRARY_PATH$)/.test(k)) env[k] = v;
    Object.assign(env, { KILN_CACHE_DIR: cache, KILN_COMPILE_WORKERS: '0', KILN_NUM_THREADS: '2', KILN_CC: ccWrapper(dir, dump, compiler), FAKE_CUDA_DUMP_DIR: dump });
    if (run === 'cuda') Object.assign(env, { LD_LIBRARY_PATH: fakeLib, CUDA_HOME: o.fakeCuda });
    if (run === 'cpu-wasm') env.KILN_CPU_PATH = 'wasm';
    if (run === 'cpu-js') env.KILN_CPU_PATH = 'js';
    const job = { run, device: run === 'cuda' ? 'cuda' : 'cpu', dump, sizes: run === 'cuda' ? o.sizes : o.cpuSizes, qwenLayers: run === 'cuda' ? o.qwenLayers : 0, autotune: o.autotune };
    process.stderr.write(`dump-kernel-sources: run ${run} ...\n`);
    const r = spawnSync(process.execPath, [SCRIPT, '--child', JSON.stringify(job)], { env, stdio: ['ignore', 'inherit', 'inherit'], maxBuffer: 1 << 28 });
    if (r.status !== 0) throw new Error(`dump-kernel-sources: run ${run} exited with ${r.status ?? r.signal}`);
    const childInfo = JSON.parse(fs.readFileSync(path.join(dump, 'steps.json'), 'utf8'));
    const firstSeen = childInfo.firstSeen; // raw file name -> step
    info.runs[run] = { seconds: +((performance.now() - rt0) / 1000).toFixed(1), steps: childInfo.steps };
    const stepOf = (name) => `${run}/${firstSeen[name] ?? 'setup'}`;
    for (const name of fs.readdirSync(dump).sort()) {
      const m = /^(c|js|wasm)-([0-9a-f]{64})\.(c|js|wasm)$/.exec(name);
      if (m) {
        const data = fs.readFileSync(path.join(dump, name));
        if (sha256(data) !== m[2]) throw new Error(`dump-kernel-sources: ${name} does not match its hash`);
        add(m[1], data, [stepOf(name)]);
        continue;
      }
      const n = /^nvrtc-([0-9a-f]{16})\.cu$/.exec(name);
      if (n) {
        const src = fs.readFileSync(path.join(dump, name));
        const opts = fs.readFileSync(path.join(dump, `nvrtc-${n[1]}.opts`), 'utf8').split('\n');
        const step = stepOf(name);
        const h = add('cuda', src, [step]);
        const unit = `name ${opts[0]}\nsource ${h}\n${opts.slice(1).filter((x) => x !== '').map((x) => `option ${x}\n`).join('')}`;
        add('cuda-unit', Buffer.from(unit), [step]);
      }
    }
  }

  // Write OUT_DIR: remove earlier dump files, then the files, manifest, origins, run info.
  fs.mkdirSync(o.out, { recursive: true });
  for (const name of fs.readdirSync(o.out)) {
    if (/^[a-z-]+-[0-9a-f]{16}\.(cu|txt|c|js|wasm)$/.test(name) || ['manifest.json', 'origins.json', 'run-info.json'].includes(name)) fs.rmSync(path.join(o.out, name));
  }
  const sorted = [...files.entries()].sort(([, a], [, b]) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  const counts = {};
  for (const k of Object.keys(KINDS).sort()) counts[k] = 0;
  for (const [file, e] of sorted) {
    fs.writeFileSync(path.join(o.out, file), e.data);
    counts[e.kind]++;
  }
  const manifest = { format: 'kiln-kernel-sources/1', counts, entries: sorted.map(([file, e]) => ({ kind: e.kind, hash: e.hash, bytes: e.bytes, file })) };
  fs.writeFileSync(path.join(o.out, 'manifest.json'), `${JSON.stringify(manifest, null, 1)}\n`);
  fs.writeFileSync(path.join(o.out, 'origins.json'), `${JSON.stringify(Object.fromEntries(sorted.map(([file]) => [file, origins.get(file)])), null, 1)}\n`);
  info.seconds = +((performance.now() - t0) / 1000).toFixed(1);
  fs.writeFileSync(path.join(o.out, 'run-info.json'), `${JSON.stringify(info, null, 1)}\n`);
  if (!o.keepTemp) fs.rmSync(tmp, { recursive: true, force: true });
  else console.log(`temp dir kept: ${tmp}`);
  const errors = Object.values(info.runs).reduce((n, r) => n + r.steps.filter((s) => s.error).length, 0);
  console.log(`kernel sources in ${o.out} (${info.seconds} s; ${errors} step(s) with errors, see run-info.json):`);
  for (const [k, n] of Object.entries(counts)) console.log(`  ${k.padEnd(10)} ${String(n).padStart(5)}  (${sorted.filter(([, e]) => e.kind === k).reduce((s, [, e]) => s + e.bytes, 0)} bytes)`);
  console.log(`  ${'total'.padEnd(10)} ${String(sorted.length).padStart(5)}`);
}

// =============================================================================================
// child: hooks, then the workloads and the LLM library

async function child(job) {
  const firstSeen = {}; // raw file name -> step
  let step = 'setup';
  const seen = new Set();
  const record = (kind, ext, data) => {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const name = `${kind}-${sha256(buf)}.${ext}`;
    if (seen.has(name)) return;
    seen.add(name);
    const file = path.join(job.dump, name);
    if (!fs.existsSync(file)) fs.writeFileSync(file, buf);
  };
  installHooks(record);

  const kiln = await import(pathToFileURL(path.join(DIST, 'src/index.js')).href);
  const { WORKLOADS } = await import(pathToFileURL(path.join(DIST, 'src/bench/workloads.js')).href);
  const { benchWorkload } = await import(pathToFileURL(path.join(DIST, 'src/bench/harness.js')).href);
  const samples = await import(pathToFileURL(path.join(DIST, 'test/samples/llm.js')).href);
  const make = await import(pathToFileURL(path.join(DIST, 'test/helpers/make.js')).href);

  const steps = [];
  /** Files in the dump not yet attributed go to the step that just ended. */
  const attribute = () => {
    for (const name of fs.readdirSync(job.dump)) if (!name.startsWith('.') && !(name in firstSeen) && name !== 'steps.json') firstSeen[name] = step;
  };
  const run = (label, fn) => {
    attribute();
    step = label;
    const t = performance.now();
    let error;
    try {
      fn();
    } catch (e) {
      error = String(e?.message ?? e).split('\n')[0].slice(0, 300);
      process.stderr.write(`  [${job.run}] ${label}: ${error}\n`);
    }
    attribute();
    steps.push({ step: label, ms: Math.round(performance.now() - t), ...(error ? { error } : {}) });
  };

  const device = job.device;
  const dtypes = ['float32', 'bfloat16'];
  /** Eager, compiled, max-autotune (and compiled forward + backward where `backward`) of one built workload. */
  const exercise = (base, w, backward) => {
    // What `kiln bench` does with a workload (src/bench/harness.ts): eager, then kiln.compile(forward,
    // { name }) (default mode) called once cold, its result compared with eager's, then warm-up and
    // timed repetitions of both.
    run(`${base}/bench`, () => void benchWorkload(w, { warmup: 1, reps: 1 }));
    if (job.autotune) {
      run(`${base}/max-autotune`, () => {
        const f = kiln.compile(w.forward, { name: w.name, mode: 'max-autotune' });
        for (let rep = 0; rep < 3; rep++) kiln.noGrad(() => f(...w.inputs));
      });
    }
    if (backward) {
      run(`${base}/compiled-backward`, () => {
        const inputs = w.inputs.map((t) => (t.dtype === 'int64' ? t : t.detach().requiresGrad_()));
        const f = kiln.compile((...xs) => {
          const y = w.forward(...xs);
          return kiln.mean(kiln.mul(y, y));
        });
        f(...inputs).backward();
      });
    }
  };
  // ------------------------------------------------------------------ benchmark workloads
  for (const size of job.sizes) {
    for (const dtype of dtypes) {
      for (const spec of WORKLOADS) {
        if (size !== 'tiny' && spec.slowOnCpu) continue; // qwen3's 'cpu'/'full' size is the whole 0.6B model: see below
        const base = `${size}/${dtype}/${spec.name}`;
        let w;
        run(`${base}/build`, () => {
          w = spec.build({ size, device, dtype, seed: 0 });
        });
        if (!w) continue;
        exercise(base, w, size === 'tiny');
        w.dispose();
      }
    }
  }
  // Qwen3-0.6B's real shapes (hidden 1024, 16/8 heads of 128, vocab 151936) with 2 of its 28 layers
  // (the others only repeat the kernels under other names), ids [1, 16] and [1, 128] (the 'cpu' and
  // 'full' sequence lengths): the LLM library at model size, where the sizes allow it.
  if (job.qwenLayers) {
    for (const dtype of dtypes) {
      let model;
      run(`qwen3-0.6b-${job.qwenLayers}layers/${dtype}/build`, () => {
        model = kiln.models.Qwen3ForCausalLM.fromConfig(kiln.models.QWEN3_0_6B.with({ numHiddenLayers: job.qwenLayers }), { seed: 0, dtype, device });
        model.eval();
      });
      if (!model) continue;
      for (const T of [16, 128]) {
        const ids = kiln.noGrad(() => {
          const t = kiln.randint(0, 151936, [1, T], { dtype: 'int64', generator: new kiln.Generator(T) });
          return device === 'cpu' ? t : t.to(device);
        });
        const w = { name: `qwen3-0.6b-${job.qwenLayers}layers`, size: 'full', device, dtype, inputs: [ids], module: model, forward: (x) => model.forward(x), run: () => kiln.noGrad(() => model.forward(ids)) };
        exercise(`qwen3-0.6b-${job.qwenLayers}layers/${dtype}/ids-1x${T}`, w, false);
      }
    }
  }
  // ------------------------------------------------------------------ LLM library
  llmSteps(kiln, samples, make, device, run);

  attribute();
  fs.writeFileSync(path.join(job.dump, 'steps.json'), JSON.stringify({ steps, firstSeen }));
  // Worker threads (Wasm GEMM pool) must not keep the process alive.
  process.exit(0);
}

/** Transparent wrappers around Function and the WebAssembly entry points that take bytes. */
function installHooks(record) {
  const OrigFunction = globalThis.Function;
  const recordFn = (args) => {
    const strs = args.map((a) => String(a));
    const body = strs.length > 0 ? strs[strs.length - 1] : '';
    const params = strs.slice(0, -1).join(',');
    record('js', 'js', `(function anonymous(${params}\n) {\n${body}\n})`);
  };
  globalThis.Function = new Proxy(OrigFunction, {
    construct(target, args, newTarget) {
      recordFn(args);
      return Reflect.construct(target, args, newTarget === globalThis.Function ? target : newTarget);
    },
    apply(target, thisArg, args) {
      recordFn(args);
      return Reflect.apply(target, thisArg, args);
    },
  });
  const WA = globalThis.WebAssembly;
  if (!WA) return;
  const bytesOf = (b) => (ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : b instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && b instanceof SharedArrayBuffer) ? new Uint8Array(b) : null);
  const recordWasm = (b) => {
    const u = bytesOf(b);
    if (u) record('wasm', 'wasm', u);
  };
  const OrigModule = WA.Module;
  WA.Module = new Proxy(OrigModule, {
    construct(target, args, newTarget) {
      recordWasm(args[0]);
      return Reflect.construct(target, args, newTarget === WA.Module ? target : newTarget);
    },
  });
  for (const name of ['compile', 'validate', 'instantiate']) {
    const orig = WA[name];
    WA[name] = function (...args) {
      recordWasm(args[0]);
      return orig.apply(this, args);
    };
  }
}

// =============================================================================================
// LLM library steps (shapes from test/llm-*.test.ts)

function llmSteps(kiln, samples, make, device, run) {
  const { llm } = kiln;
  const { rand } = make;
  const { llmOpcheckSamples, ropeCache, ropePositions, routedIds } = samples;
  const on = (t) => (t === null ? null : device === 'cpu' ? t : t.to(device));
  const HALVES = ['float32', 'float16', 'bfloat16'];
  const flat = (r) => (r instanceof kiln.Tensor ? [r] : Array.isArray(r) ? r.flatMap(flat) : r && typeof r === 'object' ? Object.values(r).flatMap(flat) : []);
  const backward = (outs) => {
    const ts = flat(outs).filter((t) => t.requiresGrad && ['float32', 'float16', 'bfloat16', 'float64'].includes(t.dtype));
    if (ts.length === 0) return;
    let loss = kiln.sum(kiln.mul(ts[0].to('float32'), 1));
    for (const t of ts.slice(1)) loss = kiln.add(loss, kiln.sum(t.to('float32')));
    loss.backward();
  };
  const ops = Object.keys(llmOpcheckSamples).sort();

  // opcheck: every implementation for the device, meta, mutation, dynamic T, float64 gradcheck.
  for (const op of ops) run(`llm/opcheck/${op}`, () => llm.opcheck(op, llmOpcheckSamples[op], { device }));

  // Forward + backward of every sample with a gradient, in float32 and bfloat16.
  const dev = new kiln.Device(device);
  for (const dtype of ['float32', 'bfloat16']) {
    for (const op of ops) {
      for (const s of llmOpcheckSamples[op]) {
        if (!s.grad) continue;
        run(`llm/grad/${dtype}/${op}/${s.label}`, () => {
          const ins = s.grad.inputs(dev).map((t) => t.detach().to(dtype).requiresGrad_());
          backward(s.grad.fn(...ins));
        });
      }
    }
  }

  // Model-sized shapes of the cuda tests (forward), and rmsNorm / act-and-mul backward.
  run('llm/shapes/norms', () =>
    kiln.noGrad(() => {
      for (const dtype of HALVES) {
        for (const [shape, layout] of [[[5, 4096], 'contiguous'], [[7, 129], 'contiguous'], [[3, 2, 24], 'contiguous'], [[4, 40], 'transposed'], [[3, 20000], 'contiguous'], [[16, 1024], 'contiguous']]) {
          const h = shape.at(-1);
          const x = on(rand(shape, 1, layout, dtype));
          const r = on(rand(shape, 2, 'contiguous', dtype));
          const w = on(rand([h], 3, 'contiguous', dtype, 0.5, 1.5));
          llm.rmsNorm(x, w, 1e-6);
          llm.addRmsNorm(x, r, w, 1e-6);
          llm.fusedAddRmsNorm(on(rand(shape, 1, 'contiguous', dtype)), r, w, 1e-6);
        }
      }
    }),
  );
  run('llm/shapes/act-and-mul', () =>
    kiln.noGrad(() => {
      for (const dtype of HALVES) {
        for (const [shape, layout] of [[[3, 2 * 11008], 'contiguous'], [[5, 258], 'contiguous'], [[2, 3, 16], 'contiguous'], [[4, 20], 'strided'], [[16, 2 * 3072], 'contiguous']]) {
          const x = on(rand(shape, 4, layout, dtype, -4, 4));
          llm.siluAndMul(x);
          llm.geluAndMul(x, 'none');
          llm.geluAndMul(x, 'tanh');
        }
      }
    }),
  );
  run('llm/shapes/rotary', () =>
    kiln.noGrad(() => {
      const cases = [
        { T: 7, qH: 4, kH: 2, hs: 128, rot: 128, neox: true, pos: 'int64', threeD: false },
        { T: 5, qH: 3, kH: 1, hs: 128, rot: 128, neox: false, pos: 'int32', threeD: true },
        { T: 3, qH: 2, kH: 2, hs: 64, rot: 32, neox: true, pos: 'int32', threeD: true },
        { T: 4, qH: 3, kH: 2, hs: 10, rot: 6, neox: false, pos: 'int64', threeD: false },
        { T: 3, qH: 2, kH: 0, hs: 12, rot: 12, neox: true, pos: 'int64', threeD: false, keyNull: true, layout: 'strided' },
      ];
      for (const dtype of HALVES) {
        for (const c of cases) {
          const shape = (h) => (c.threeD ? [c.T, h, c.hs] : [c.T, h * c.hs]);
          const q = on(rand(shape(c.qH), 5, c.layout ?? 'contiguous', dtype));
          const k = c.keyNull ? null : on(rand(shape(c.kH), 6, 'contiguous', dtype));
          llm.rotaryEmbedding(on(ropePositions(c.T, 64, 7, c.pos)), q, k, c.hs, on(ropeCache(64, c.rot)), c.neox);
        }
        // qkNormRotary at Qwen3 head sizes (D 64, 128), transposed slices of a fused qkv.
        for (const D of [64, 128]) {
          const T = 5;
          const qkv = on(rand([1, T, 6 * D], 8, 'contiguous', dtype));
          const q = kiln.transpose(kiln.reshape(kiln.narrow(qkv, 2, 0, 4 * D), [1, T, 4, D]), 1, 2);
          const k = kiln.transpose(kiln.reshape(kiln.narrow(qkv, 2, 4 * D, 2 * D), [1, T, 2, D]), 1, 2);
          // [T, D] cos and sin tables: each half of the rope cache row twice.
          const cache = ropeCache(T, D, dtype);
          const cs = on(kiln.cat([cache.narrow(1, 0, D / 2), cache.narrow(1, 0, D / 2)], 1));
          const sn = on(kiln.cat([cache.narrow(1, D / 2, D / 2), cache.narrow(1, D / 2, D / 2)], 1));
          llm.qkNormRotary(q, k, on(rand([D], 9, 'contiguous', dtype)), on(rand([D], 10, 'contiguous', dtype)), 1e-6, cs, sn, true);
          // qkNormRotaryCache (a decode step's rotary + paged-cache write): [T, heads, D] slices of the qkv, int64 and int32 slots.
          for (const slotDtype of ['int64', 'int32']) {
            const flat = kiln.reshape(qkv, [T, 6 * D]);
            const part = (at, h) => kiln.reshape(kiln.narrow(flat, 1, at * D, h * D), [T, h, D]);
            const cacheT = () => on(kiln.zeros([4, 4, 1, D], { dtype }));
            const slots = on(kiln.tensor([3, -1, 0, 9, 5], { dtype: slotDtype }));
            const tbl = (t) => kiln.reshape(t, [T, 1, D]);
            llm.qkNormRotaryCache(part(0, 4), part(4, 1), part(5, 1), on(rand([D], 9, 'contiguous', dtype)), on(rand([D], 10, 'contiguous', dtype)), 1e-6, tbl(cs), tbl(sn), true, cacheT(), cacheT(), slots);
          }
        }
        // linearSiluAndMul: the gated GEMV at one row (Qwen3-0.6B's gate/up: I 3072, K 1024; a small I for a split K), else the fallback.
        for (const [I, K] of [[3072, 1024], [16, 256]]) llm.linearSiluAndMul(on(rand([1, K], 11, 'contiguous', dtype)), on(rand([2 * I, K], 12, 'contiguous', dtype)), null);
        // addRmsNormLinear: the norm-prologue GEMV at one row (qkv N 4096 and gate/up I 3072 at K 1024; a small N for a split K), else the parts.
        for (const [N, K, gated] of [[4096, 1024, false], [3072, 1024, true], [16, 256, false]]) {
          llm.addRmsNormLinear(on(rand([1, K], 13, 'contiguous', dtype)), on(rand([1, K], 14, 'contiguous', dtype)), on(rand([K], 15, 'contiguous', dtype)), 1e-6, on(rand([gated ? 2 * N : N, K], 16, 'contiguous', dtype)), null, gated);
        }
      }
    }),
  );
  run('llm/shapes/moe-routing', () =>
    kiln.noGrad(() => {
      for (const dtype of HALVES) {
        for (const [t, e, k] of [[1, 8, 2], [7, 60, 8], [33, 256, 8], [5, 1000, 40], [300, 64, 6], [16, 128, 8]]) {
          for (const renorm of [false, true]) llm.topkSoftmax(on(rand([t, e], t * 7 + e, 'contiguous', dtype, -3, 3)), k, renorm);
        }
        for (const [t, e, k, groups, keep] of [[9, 256, 8, 8, 4], [4, 64, 6, 8, 3], [17, 12, 4, 3, 2]]) {
          for (const sigmoid of [false, true]) {
            for (const withBias of [false, true]) {
              const b = withBias ? on(rand([e], 99, 'contiguous', 'float32', -0.2, 0.2)) : null;
              llm.groupedTopk(on(rand([t, e], t + e, 'contiguous', dtype, -3, 3)), k, true, { numExpertGroup: groups, topkGroup: keep, scoringFunc: sigmoid ? 'sigmoid' : 'softmax', eScoreCorrectionBias: b, routedScalingFactor: 2.5 });
            }
          }
        }
      }
    }),
  );
  run('llm/shapes/moe-compute', () =>
    kiln.noGrad(() => {
      for (const dtype of [...HALVES, 'float64']) {
        for (const [shape, layout] of [[[5, 2, 4096], 'contiguous'], [[33, 8, 24], 'contiguous'], [[7, 3, 13], 'contiguous'], [[6, 4, 16], 'transposed'], [[3, 2, 10], 'strided']]) {
          llm.moeSum(on(rand(shape, shape[2], layout, dtype)));
        }
      }
      for (const dtype of HALVES) {
        for (const [t, h, inter, e, k, act, idDtype] of [[37, 64, 48, 8, 2, 'silu', 'int32'], [5, 33, 20, 6, 3, 'gelu', 'int64'], [1, 16, 8, 16, 2, 'silu', 'int32']]) {
          const x = on(rand([t, h], t + h, 'contiguous', dtype, -1, 1));
          const w13 = on(rand([e, 2 * inter, h], e + 1, 'contiguous', dtype, -0.3, 0.3));
          const w2 = on(rand([e, h, inter], e + 2, 'contiguous', dtype, -0.3, 0.3));
          const tw = on(rand([t, k], 3, 'contiguous', 'float32', 0, 1));
          const ids = on(routedIds(t, k, Math.max(k, e / 2), 7).to(idDtype));
          llm.fusedMoe(x, w13, w2, tw, ids, act);
        }
      }
    }),
  );
  run('llm/shapes/mhc', () =>
    kiln.noGrad(() => {
      for (const dtype of ['float32', 'bfloat16']) {
        for (const [t, n, h] of [[5, 4, 64], [3, 1, 10], [2, 6, 33], [2, 10, 8]]) {
          const rows = n * (n + 2);
          const s = on(rand([t, n, h], n + h, 'contiguous', dtype));
          llm.mhcPre(s, on(rand([rows, n * h], 2, 'contiguous', 'float32', -0.1, 0.1)), on(rand([3], 3, 'contiguous', 'float32', 0.5, 1.5)), on(rand([rows], 4, 'contiguous', 'float32', -1, 1)), { sinkhornIters: 20, preEps: 1e-3, rmsEps: 1e-6 });
          llm.mhcPost(on(rand([t, h], 5, 'contiguous', dtype)), s, on(rand([t, n], 6, 'contiguous', 'float32', 0, 2)), on(kiln.contiguous(rand([t, n, n], 7, 'transposed', 'float32', 0, 1))));
          llm.mhcHeadCollapse(s, on(rand([n, n * h], 8, 'contiguous', 'float32', -0.1, 0.1)), on(rand([1], 9, 'contiguous', 'float32', 0.5, 1.5)), on(rand([n], 10, 'contiguous', 'float32')), { rmsEps: 1e-6, eps: 0.01 });
        }
      }
    }),
  );
  run('llm/shapes/backward', () => {
    for (const dtype of ['float32', 'bfloat16']) {
      for (const [rows, h] of [[5, 129], [16, 1024]]) {
        const x = on(rand([rows, h], 8, 'contiguous', dtype)).requiresGrad_();
        const w = on(rand([h], 9, 'contiguous', dtype, 0.5, 1.5)).requiresGrad_();
        llm.rmsNorm(x, w, 1e-6).backward(on(rand([rows, h], 10, 'contiguous', dtype)));
        const r = on(rand([rows, h], 11, 'contiguous', dtype)).requiresGrad_();
        const o = llm.addRmsNorm(x, r, w, 1e-6);
        backward([o.out, o.residual]);
      }
      for (const fn of [(t) => llm.siluAndMul(t), (t) => llm.geluAndMul(t, 'none'), (t) => llm.geluAndMul(t, 'tanh')]) {
        for (const [rows, d] of [[3, 65], [16, 3072]]) {
          const a = on(rand([rows, 2 * d], 11, 'contiguous', dtype, -3, 3)).requiresGrad_();
          fn(a).backward(on(rand([rows, d], 12, 'contiguous', dtype)));
        }
      }
    }
  });

  // kiln.compile (fullgraph) of the graphs of test/llm-compile.test.ts and a rewrite pattern.
  for (const dtype of ['float32', 'bfloat16']) {
    const compiled = (name, fn, args) =>
      run(`llm/compiled/${dtype}/${name}`, () => {
        const f = kiln.compile(fn, { fullgraph: true });
        kiln.noGrad(() => f(...args()));
      });
    {
      const H = 16;
      const w = on(rand([H], 1, 'contiguous', dtype));
      const cache = on(ropeCache(32, 8));
      compiled(
        'norm-act-rope',
        (x, res, pos) => {
          const { input, residual } = llm.fusedAddRmsNorm(x, res, w, 1e-6);
          const g = llm.siluAndMul(input);
          const q = llm.geluAndMul(kiln.cat([g, g], -1), 'tanh');
          const { query } = llm.rotaryEmbedding(pos, q, null, 8, cache, false);
          return { y: llm.rmsNorm(query, llm.rmsNorm(w.reshape([2, 8]), w.narrow(0, 0, 8)).reshape([H]).narrow(0, 0, 8), 1e-5), residual };
        },
        () => [on(rand([5, H], 2, 'contiguous', dtype)), on(rand([5, H], 3, 'contiguous', dtype)), on(ropePositions(5, 32, 4))],
      );
    }
    {
      const [Tk, H, nH, nKv, hs, E, I] = [6, 32, 4, 2, 8, 4, 16];
      const p = (shape, seed) => on(rand(shape, seed, 'contiguous', dtype, -0.3, 0.3));
      const W = { ln1: p([H], 1).add(1), ln2: p([H], 2).add(1), wq: p([nH * hs, H], 3), wk: p([nKv * hs, H], 4), wv: p([nKv * hs, H], 5), wo: p([H, nH * hs], 6), gate: p([E, H], 7), w13: p([E, 2 * I, H], 8), w2: p([E, H, I], 9) };
      const cache = on(ropeCache(64, hs));
      compiled(
        'qwen3-moe-block',
        (x, positions) => {
          const h = llm.rmsNorm(x, W.ln1, 1e-6);
          const q = kiln.linear(h, W.wq);
          const k = kiln.linear(h, W.wk);
          const v = kiln.linear(h, W.wv);
          llm.rotaryEmbedding(positions, q, k, hs, cache, true);
          const heads = (t, n) => t.reshape([Tk, n, hs]).transpose(0, 1);
          const attn = kiln.scaledDotProductAttention(heads(q, nH), heads(k, nKv), heads(v, nKv), null, 0, true, null, true);
          const o = kiln.linear(attn.transpose(0, 1).reshape([Tk, nH * hs]), W.wo);
          const { out, residual } = llm.addRmsNorm(o, x, W.ln2, 1e-6);
          const { weights, ids } = llm.topkSoftmax(kiln.linear(out, W.gate), 2, true);
          return kiln.add(residual, llm.fusedMoe(out, W.w13, W.w2, weights, ids, 'silu'));
        },
        () => [on(rand([Tk, H], 10, 'contiguous', dtype)), on(ropePositions(Tk, 64, 11))],
      );
    }
    {
      const [N, n, H, F] = [5, 4, 8, 12];
      const p = (shape, seed, lo = -0.3, hi = 0.3) => on(rand(shape, seed, 'contiguous', 'float32', lo, hi));
      const phi = p([n * (n + 2), n * H], 1);
      const alpha = p([3], 2, 0.5, 1.5);
      const bias = p([n * (n + 2)], 3, -1, 1);
      const hPhi = p([n, n * H], 4);
      const hAlpha = p([1], 5, 0.5, 1.5);
      const hBias = p([n], 6);
      const norm = on(rand([H], 7, 'contiguous', dtype, 0.5, 1.5));
      const up = on(rand([2 * F, H], 8, 'contiguous', dtype, -0.3, 0.3));
      const down = on(rand([H, F], 9, 'contiguous', dtype, -0.3, 0.3));
      compiled(
        'mhc-block',
        (streams) => {
          let s = streams;
          for (let layer = 0; layer < 2; layer++) {
            const { layerInput, post, comb } = llm.mhcPre(s, phi, alpha, bias, { sinkhornIters: 20 });
            const f = kiln.linear(llm.siluAndMul(kiln.linear(llm.rmsNorm(layerInput, norm), up)), down);
            s = llm.mhcPost(f, s, post, comb);
          }
          return llm.mhcHeadCollapse(s, hPhi, hAlpha, hBias);
        },
        () => [on(rand([N, n, H], 10, 'contiguous', dtype))],
      );
    }
    {
      // Core-op patterns the rewrites turn into llm.addRmsNorm / llm.rmsNorm / act-and-mul.
      const w = on(rand([64], 2, 'contiguous', dtype));
      compiled(
        'rewrite-patterns',
        (a, r) => {
          const s = kiln.add(a, r);
          const y = s.mul(kiln.rsqrt(kiln.add(kiln.mean(kiln.pow(s, 2), [-1], true), 1e-6))).mul(w);
          const [g, u] = [kiln.narrow(y, -1, 0, 32), kiln.narrow(y, -1, 32, 32)];
          return [kiln.mul(kiln.silu(g), u), s.mul(2)];
        },
        () => [on(rand([8, 64], 3, 'contiguous', dtype)), on(rand([8, 64], 4, 'contiguous', dtype))],
      );
    }
  }
}
