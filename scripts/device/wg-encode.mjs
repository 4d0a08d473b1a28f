// Per-dispatch encode + submit cost in Dawn (node), by variant.
import { create, globals } from 'webgpu';
Object.assign(globalThis, globals);
const backend = process.env.BK ?? 'null';
const gpu = create([`backend=${backend}`, 'enable-dawn-features=allow_unsafe_apis', ...(process.env.TOG ? [process.env.TOG] : [])]);
const adapter = await gpu.requestAdapter();
const device = await adapter.requestDevice();
const mk = (nb) => {
  const decl = Array.from({ length: nb }, (_, i) => `@group(0) @binding(${i}) var<storage, read_write> b${i}: array<f32>;`).join('\n');
  const body = Array.from({ length: nb }, (_, i) => `b${i}[gid.x] += 1.0;`).join('\n');
  const module = device.createShaderModule({ code: `${decl}\n@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3u) { ${body} }` });
  return device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
};
const bufs = Array.from({ length: 64 }, () => device.createBuffer({ size: 1 << 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST }));
const N = 256;
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const nb of (process.env.NB ?? '1,3,6').split(',').map(Number)) {
  const pipes = [mk(nb), mk(nb)];
  const groups = Array.from({ length: N }, (_, j) => device.createBindGroup({ layout: pipes[j % 2].getBindGroupLayout(0), entries: Array.from({ length: nb }, (_, i) => ({ binding: i, resource: { buffer: bufs[(j * nb + i) % 64] } })) }));
  for (const alt of (process.env.ALT ?? '0,1').split(',').map((x) => x === '1')) for (const every of (process.env.EVERY ?? '0,64').split(',').map(Number)) {
    const enc_t = [], sub_t = [], tot = [];
    for (let r = 0; r < 40; r++) {
      const t0 = performance.now();
      let enc = device.createCommandEncoder(); let pass = enc.beginComputePass(); let sub = 0; let lastP;
      for (let j = 0; j < N; j++) {
        if (every && j && j % every === 0) { pass.end(); const s = performance.now(); device.queue.submit([enc.finish()]); sub += performance.now() - s; enc = device.createCommandEncoder(); pass = enc.beginComputePass(); lastP = undefined; }
        const p = alt ? pipes[j % 2] : pipes[0];
        if (p !== lastP) pass.setPipeline(p); lastP = p;
        pass.setBindGroup(0, alt ? groups[j] : groups[j & ~1]);
        pass.dispatchWorkgroups(1);
      }
      pass.end(); const s = performance.now(); device.queue.submit([enc.finish()]); sub += performance.now() - s;
      const t1 = performance.now();
      tot.push(t1 - t0); sub_t.push(sub);
      await device.queue.onSubmittedWorkDone();
    }
    console.log(JSON.stringify({ backend, bindings: nb, alternatingPipelines: alt, submitEvery: every, us_per_dispatch_total: +(med(tot) * 1000 / N).toFixed(2), us_per_dispatch_submit: +(med(sub_t) * 1000 / N).toFixed(2) }));
  }
}
process.exit(0);
