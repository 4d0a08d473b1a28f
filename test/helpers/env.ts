/**
 * Environment variables for the span of one call: options read from process.env when a program is
 * compiled or a kernel launched (KILN_ADD_RMSNORM_LINEAR, KILN_QK_NORM_ROTARY, ...), set for one
 * compile or run and restored after, whatever it throws.
 */

/** Runs fn with `name` set to `value` (unset for undefined), then puts back what was there. */
export function withEnv<T>(name: string, value: string | undefined, fn: () => T): T {
  const saved = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env[name];
    else process.env[name] = saved;
  }
}
