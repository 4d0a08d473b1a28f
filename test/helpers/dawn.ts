/**
 * Whether the `webgpu` npm package (Dawn) is installed, for tests that run Dawn's null backend.
 * Imports nothing of Kiln: those tests set KILN_WEBGPU_BACKEND=null before Kiln first loads, and
 * a static import of Kiln here would load it earlier (static imports run first).
 */
import { createRequire } from 'node:module';

/** The skip reason of a null-backend test: false where Dawn is installed. */
export function dawnSkipReason(): string | false {
  try {
    createRequire(import.meta.url).resolve('webgpu');
    return false;
  } catch {
    return "the 'webgpu' package (Dawn) is not installed";
  }
}
