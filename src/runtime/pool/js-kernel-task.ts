/**
 * Built-in compile task 'js-kernel': validates generated JavaScript by constructing it with
 * `new Function` (which parses but never runs it) and hashes it. Syntax errors come back as data,
 * formatted like a compiler diagnostic: `name:line:column: SyntaxError: message`, the offending line
 * and a caret under the column.
 */
import { createHash, vm } from '../../platform/index.js';

export interface JsKernelPayload {
  /** The function body. */
  source: string;
  /** Kernel name, used in diagnostics. */
  name: string;
  /** Parameter names of the function (default: none). */
  params?: string[];
}

export type JsKernelResult =
  | { ok: true; name: string; hash: string; source: string }
  | { ok: false; name: string; error: string; line?: number; column?: number };

/** sha256 (hex) of a kernel's source text. */
export function kernelSourceHash(source: string): string {
  return createHash('sha256').update(source, 'utf8').digest('hex');
}

function checkPayload(payload: unknown): JsKernelPayload {
  const p = payload as Partial<JsKernelPayload> | null;
  if (typeof p !== 'object' || p === null) throw new TypeError(`js-kernel task: payload must be { source, name }, got ${String(payload)}`);
  if (typeof p.source !== 'string') throw new TypeError(`js-kernel task: 'source' must be a string, got ${typeof p.source}`);
  if (typeof p.name !== 'string' || p.name === '') throw new TypeError(`js-kernel task: 'name' must be a non-empty string, got ${String(p.name)}`);
  if (p.params !== undefined && (!Array.isArray(p.params) || !p.params.every((x) => typeof x === 'string'))) {
    throw new TypeError(`js-kernel task '${p.name}': 'params' must be an array of strings`);
  }
  return { source: p.source, name: p.name, params: p.params };
}

/** Finds the line and column of a syntax error by compiling the same function through vm, which reports them. */
function locate(source: string, params: readonly string[]): { line: number; column: number } | undefined {
  // new Function's own wrapping: `(function anonymous(<params>\n) {\n<body>\n})`; the body starts on line 3.
  const wrapped = `(function anonymous(${params.join(',')}\n) {\n${source}\n})`;
  try {
    new vm.Script(wrapped, { filename: 'kernel.js' });
    return undefined;
  } catch (e) {
    const lines = (e as Error).stack?.split('\n') ?? [];
    const m = /^kernel\.js:(\d+)$/.exec(lines[0] ?? '');
    if (!m) return undefined;
    const body = source.split('\n');
    const line = Number(m[1]) - 2;
    if (line < 1) return undefined;
    // Past the body (an unclosed brace or string): point just after the last line.
    if (line > body.length) return { line: body.length, column: (body[body.length - 1]?.length ?? 0) + 1 };
    const caret = (lines[2] ?? '').indexOf('^');
    return { line, column: caret >= 0 ? caret + 1 : 1 };
  }
}

/** The 'js-kernel' handler. Throws only for a malformed payload; bad JavaScript is reported in the result. */
export function jsKernelTask(payload: unknown): JsKernelResult {
  const { source, name, params = [] } = checkPayload(payload);
  try {
    new Function(...params, source);
  } catch (e) {
    const err = e as Error;
    const head = `${err.name}: ${err.message}`;
    const where = err instanceof SyntaxError ? locate(source, params) : undefined;
    if (!where) return { ok: false, name, error: `${name}: ${head}` };
    const text = source.split('\n')[where.line - 1] ?? '';
    const gutter = `${where.line} | `;
    const error = `${name}:${where.line}:${where.column}: ${head}\n${gutter}${text}\n${' '.repeat(gutter.length + where.column - 1)}^`;
    return { ok: false, name, error, line: where.line, column: where.column };
  }
  return { ok: true, name, hash: kernelSourceHash(source), source };
}
