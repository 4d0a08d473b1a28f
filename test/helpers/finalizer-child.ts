/** Child process for the FinalizationRegistry test (needs --expose-gc). */
import * as kiln from '../../src/index.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const before = kiln.memoryStats().allocatedBytes;
(() => {
  for (let i = 0; i < 4; i++) kiln.zeros([1024, 256]);
})();
const during = kiln.memoryStats().allocatedBytes;
for (let i = 0; i < 20 && kiln.memoryStats().allocatedBytes > before; i++) {
  gc();
  await new Promise((r) => setTimeout(r, 10));
}
console.log(JSON.stringify({ before, during, after: kiln.memoryStats().allocatedBytes }));
