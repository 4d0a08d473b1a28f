/**
 * The layer check (docs/architecture.md, "Layers"): src/ folders in their order, bottom up. A module
 * may import only from its own layer or a lower one, so the folders form no cycle. Rules are made
 * from the one list below, so the order lives in one place; `npm run lint:layers` runs it in CI and
 * test/layers.test.ts shows that a planted upward import fails it.
 */
const LAYERS = ['platform', 'runtime', 'tensor', 'ops', 'kernels', 'api', 'autograd', 'nn', 'optim', 'data', 'compile', 'llm', 'io', 'models', 'serve', 'bench', 'cli'];
/** Files directly in src/ (index.ts, memory.ts): the public surface, above serve and below bench/cli. */
const ROOT_INDEX = 'serve';
/** Accelerator folders: each may use the host's (cpu) helpers, none another vendor's. */
const ACCELERATORS = ['cpu', 'cuda', 'webgpu'];

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer}`,
  comment: `src/${layer} may import only ${LAYERS.slice(0, i + 1).join(', ')} (docs/architecture.md, "Layers")`,
  severity: 'error',
  from: { path: `^src/${layer}/` },
  to: { path: `^src/(${LAYERS.slice(i + 1).join('|')})/` },
}));

const root = {
  name: 'layer-root',
  comment: `src/*.ts (the public index) sits above ${ROOT_INDEX}: only bench and cli may import it`,
  severity: 'error',
  from: { path: `^src/(${LAYERS.slice(0, LAYERS.indexOf(ROOT_INDEX) + 1).join('|')})/` },
  to: { path: '^src/[^/]+\\.ts$' },
};

const vendors = ACCELERATORS.filter((a) => a !== 'cpu').map((a) => ({
  name: `accelerator-${a}`,
  comment: `src/*/${a}/ may use the host's cpu helpers but no other accelerator's folder, and no other accelerator may use it`,
  severity: 'error',
  from: { path: `^src/[^/]+/(${ACCELERATORS.filter((b) => b !== a).join('|')})/` },
  to: { path: `^src/[^/]+/${a}/` },
}));

module.exports = {
  forbidden: [...upward, root, ...vendors],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    // ES module sources import './x.js' for './x.ts'.
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
