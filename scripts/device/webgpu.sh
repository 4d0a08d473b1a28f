#!/usr/bin/env bash
# Device round for the webgpu accelerator (issue #20, first slice): Dawn/Vulkan on the H200. Shows
# what Dawn finds (probe, adapter, features with Kiln's toggles), then runs the webgpu tests: the
# null-backend validation (as in CI) and the numeric comparisons against the CPU (pointwise, matrix
# products, reductions eager and compiled on webgpu, Event timing, the WGSL math library against
# float64 and its elementwise throughput), which skip without an adapter,
# and a GEMM throughput line per dtype and size. Run from the repo root through .device/run.sh with
# dist/ built and carried (node_modules must hold the `webgpu` package, Dawn for Node 0.6.x):
#   bash .device/run.sh bash scripts/device/webgpu.sh
# Each step writes its own file under $OUT; a summary goes to stdout.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L; node --version
export KILN_CACHE_DIR=/tmp/kiln-cache
if [ ! -d node_modules/webgpu ]; then echo "node_modules/webgpu is missing: npm install (package.json lists webgpu ^0.6.2)"; exit 2; fi
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null | head; ldconfig -p | grep -m1 libvulkan.so.1 || echo "no libvulkan.so.1 on the loader path (Dawn needs the Vulkan loader)"

cat > "$out/probe.mjs" <<'JS'
import * as kiln from '../dist/src/index.js';
const p = kiln.probeAccelerators().find((r) => r.type === 'webgpu');
console.log(JSON.stringify(p));
if (p?.available) {
  console.log(JSON.stringify(kiln.getAccelerator('webgpu').properties(0), null, 1));
  const x = kiln.randn([1 << 20]).to('webgpu');
  const t = performance.now();
  for (let i = 0; i < 100; i++) kiln.add(x, x).dispose();
  kiln.synchronize('webgpu');
  console.log(`100 eager adds of 1M float32: ${((performance.now() - t) / 100).toFixed(3)} ms each (host + device, first includes pipeline compile)`);
  console.log('sum check', kiln.add(x, x).to('cpu').toFlatArray().slice(0, 3), x.to('cpu').toFlatArray().slice(0, 3));
}
JS
cp "$out/probe.mjs" dist/webgpu-probe.mjs && sed -i "s|'../dist/src/index.js'|'./src/index.js'|" dist/webgpu-probe.mjs
timeout 120 node dist/webgpu-probe.mjs > "$out/probe.txt" 2>&1; el "probe rc=$?"; grep -v "^ " "$out/probe.txt" | head -5
timeout 300 node --test dist/test/webgpu-validate.test.js > "$out/webgpu-validate.txt" 2>&1; el "validate rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok" "$out/webgpu-validate.txt"
timeout 400 node --test dist/test/webgpu-pointwise.test.js > "$out/webgpu-pointwise.txt" 2>&1; el "pointwise rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/webgpu-pointwise.txt"
grep -m5 -E "cases differ|element [0-9]+:" "$out/webgpu-pointwise.txt" | cut -c1-400
# Matrix products (the tiled WGSL GEMM) against float64 references, and Event timing in device time.
timeout 400 node --test dist/test/webgpu-linalg.test.js > "$out/webgpu-linalg.txt" 2>&1; el "linalg rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/webgpu-linalg.txt"
grep -m8 -E "cases differ|element [0-9]+:|device [0-9.e-]+ ms|max \|err\|" "$out/webgpu-linalg.txt" | cut -c1-400
# The autotuner's Event test on every available accelerator (webgpu: matmul x8 timed by timestamps).
timeout 300 node --test --test-name-pattern "Event timing" dist/test/compile-autotune.test.js > "$out/autotune-event.txt" 2>&1; el "autotune event rc=$?"
grep -E "^# (pass|fail|skipped)|not ok|timed" "$out/autotune-event.txt" | head -10
# GEMM throughput (float32, float16, bfloat16), device time from kiln.Event.
cat > dist/webgpu-gemm-bench.mjs <<'JS'
import * as kiln from './src/index.js';
for (const dtype of ['float32', 'float16', 'bfloat16']) {
  for (const n of [1024, 2048, 4096]) {
    const a = kiln.randn([n, n]).to(dtype).to('webgpu');
    const b = kiln.randn([n, n]).to(dtype).to('webgpu');
    kiln.matmul(a, b).dispose();
    kiln.synchronize('webgpu');
    const s = new kiln.Event('webgpu'), e = new kiln.Event('webgpu');
    s.record();
    for (let i = 0; i < 5; i++) kiln.matmul(a, b).dispose();
    e.record();
    e.synchronize();
    const ms = s.elapsedTime(e) / 5;
    console.log(`${dtype} ${n}^3: ${ms.toFixed(3)} ms, ${(2 * n ** 3 / ms / 1e9).toFixed(2)} TFLOP/s`);
    a.dispose(); b.dispose();
  }
}
JS
timeout 200 node dist/webgpu-gemm-bench.mjs > "$out/webgpu-gemm-bench.txt" 2>&1; el "gemm bench rc=$?"
cat "$out/webgpu-gemm-bench.txt" | head -12
timeout 400 node --test dist/test/webgpu-reduction.test.js > "$out/webgpu-reduction.txt" 2>&1; el "reduction rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/webgpu-reduction.txt"
grep -m8 -E "cases differ|result [0-9]+:|element [0-9]+:" "$out/webgpu-reduction.txt" | cut -c1-400
# The ops issue #20 item 2 brought to webgpu (scans, sorts, scatters, index writes, masks, pooling,
# conv, norms, dropout) against float64 CPU references, their backward, and the meta contract of
# every registered op on webgpu.
for t in webgpu-ops webgpu-autograd webgpu-meta-vs-real; do
  timeout 400 node --test dist/test/$t.test.js > "$out/$t.txt" 2>&1; el "$t rc=$?"
  grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/$t.txt"
  grep -m8 -E "mismatches|samples fail|leaf [0-9]+ element|result [0-9]+:" "$out/$t.txt" | cut -c1-400
done
# Kiln's WGSL math library (issue #18): every function within its ulp bound of float64, the edges
# as the cpu; then device time of its elementwise kernels next to a plain copy (neg) at 64M float32:
# the functions' ALU work (tens of operations per element) should hide behind memory traffic.
timeout 300 node --test dist/test/webgpu-math.test.js > "$out/webgpu-math.txt" 2>&1; el "math rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/webgpu-math.txt"
grep -m12 -E "ulp >|, cpu " "$out/webgpu-math.txt" | cut -c1-400
cat > dist/webgpu-math-bench.mjs <<'JS'
import * as kiln from './src/index.js';
const n = 1 << 26;
const x = kiln.randn([n]).mul(3).to('webgpu');
const y = kiln.rand([n]).add(0.5).to('webgpu');
const ops = { neg: () => kiln.neg(x), add: () => kiln.add(x, y), exp: () => kiln.exp(x), log: () => kiln.log(y), sin: () => kiln.sin(x), tanh: () => kiln.tanh(x), sigmoid: () => kiln.sigmoid(x), gelu: () => kiln.nn.functional.gelu(x), erf: () => kiln.erf(x), pow: () => kiln.pow(y, x), div: () => kiln.div(x, y) };
for (const [name, f] of Object.entries(ops)) {
  f().dispose();
  kiln.synchronize('webgpu');
  const s = new kiln.Event('webgpu'), e = new kiln.Event('webgpu');
  s.record();
  for (let i = 0; i < 10; i++) f().dispose();
  e.record();
  e.synchronize();
  const ms = s.elapsedTime(e) / 10;
  const bytes = (name === 'add' || name === 'pow' || name === 'div' ? 3 : 2) * 4 * n;
  console.log(`${name}: ${ms.toFixed(3)} ms, ${(bytes / ms / 1e6).toFixed(1)} GB/s`);
}
JS
timeout 200 node dist/webgpu-math-bench.mjs > "$out/webgpu-math-bench.txt" 2>&1; el "math bench rc=$?"
head -12 "$out/webgpu-math-bench.txt"
# The ops a Qwen3 forward and generation need (indexing, attention, rmsNorm, paged cache) against
# float64 CPU references, and the tiny Qwen3 on webgpu: logits eager and compiled, greedy tokens.
timeout 400 node --test dist/test/webgpu-llm.test.js > "$out/webgpu-llm.txt" 2>&1; el "llm rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/webgpu-llm.txt"
grep -m12 -E "cases differ|: element [0-9]+:|threw|greedy|forward|AssertionError" "$out/webgpu-llm.txt" | cut -c1-400
# Generation on webgpu: the engine's eager and compiled decode, float32/float16/bfloat16, against
# transformers' greedy tokens on the tiny checkpoint; kiln.generate and `kiln generate --device webgpu`.
timeout 400 node --test dist/test/webgpu-generate.test.js > "$out/webgpu-generate.txt" 2>&1; el "generate rc=$?"
grep -E "^# (pass|fail|skipped)|^not ok|# SKIP|^# (decode|float16|bfloat16)" "$out/webgpu-generate.txt"
grep -m8 -E "prompt [0-9]+|step [0-9]+:|AssertionError" "$out/webgpu-generate.txt" | cut -c1-400
# Sampling (sampler, penalties, engine eager/compiled) against float64 references, `kiln serve
# --device webgpu` with sampling requests, and Qwen3-MoE tiny generation (eager, compiled, bfloat16).
for t in webgpu-sampling webgpu-serve webgpu-moe; do
  timeout 400 node --test "dist/test/$t.test.js" > "$out/$t.txt" 2>&1; el "$t rc=$?"
  grep -E "^# (pass|fail|skipped)|^not ok|# SKIP" "$out/$t.txt"
  grep -m8 -E "row [0-9]+|step [0-9]+|prompt [0-9]+|AssertionError" "$out/$t.txt" | cut -c1-400
done
