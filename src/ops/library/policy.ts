/**
 * Dispatch policy for library ops: each op may have several implementations (the library kernel
 * for an accelerator, a reference composition of core ops that runs anywhere, later vendor
 * kernels), each with a kind and a priority. A policy (prefer / deny / per-op order, from
 * `setLlmPolicy` or the KILN_LLM_POLICY environment variable as JSON) picks one per (op, device).
 *
 * The choice is resolved ahead of time into a table, so the op's entry path is two Map lookups:
 * no logging, no lazy imports, nothing that could break capture. `freezeLlmPolicy()` (done by
 * kiln.compile on its first compile) pins the table; while frozen, `setLlmPolicy` throws until
 * `thawLlmPolicy()`. The frozen table and the manifest form `llmManifestHash()`, which belongs in
 * every compile-cache key: a program compiled under one choice is never reused under another.
 *
 * Wiring: the first implementation for a concrete device registers one kernel on the op for that
 * device (a thin selector); implementations for any device ('*') back the op's decomposition,
 * which the dispatcher uses on devices without a kernel.
 */
import { createHash } from '../../platform/index.js';
import { getOption } from '../../runtime/config.js';
import type { DeviceType } from '../../runtime/device.js';
import { getOp, registerKernel, setDecomposition } from '../registry.js';
import type { KernelContext, MetaResult } from '../schema.js';
import type { DType } from '../../tensor/dtype.js';
import type { Tensor } from '../../tensor/tensor.js';
import { manifestText, manifestVersion } from './manifest.js';

export type ImplKind = 'kernel' | 'reference' | 'vendor';

export type ImplFn = (ctx: KernelContext, ...args: readonly unknown[]) => Tensor | Tensor[];

export interface LlmImpl {
  /** Unique per op, e.g. 'cpu-kernel', 'reference', 'cuda-kernel'. */
  readonly name: string;
  readonly kind: ImplKind;
  /** The device type it runs on, or '*' for any (compositions of core ops). */
  readonly device: DeviceType | '*';
  /** Higher wins among implementations the policy ranks equally. */
  readonly priority: number;
  readonly fn: ImplFn;
  /**
   * Ops that a compile pass creates from other ops (llm.addRmsNormLinear): whether this
   * implementation runs the op as its own kernel for operands of `dtype` with `rows` rows of `k`,
   * rather than as the op's parts. The pass fires only where the chosen implementation says so
   * (absent: nowhere), so a device opts in by registering, and the pass names no device.
   */
  readonly takes?: (dtype: DType, rows: number, k: number) => boolean;
}

export interface LlmPolicy {
  /** Kinds in order of preference (unlisted kinds rank after listed ones). */
  readonly prefer?: readonly ImplKind[];
  /** Kinds or implementation names never to use. */
  readonly deny?: readonly string[];
  /** Per op: implementation names or kinds in order; overrides `prefer` for that op. */
  readonly order?: Readonly<Record<string, readonly string[]>>;
}

const DEFAULT_POLICY: LlmPolicy = { prefer: ['vendor', 'kernel', 'reference'] };

const impls = new Map<string, LlmImpl[]>();
/** op -> device type -> chosen implementation (the table the entry path reads). */
let table = new Map<string, Map<string, LlmImpl>>();
let policy: LlmPolicy = DEFAULT_POLICY;
let frozen = false;
const wiredDevices = new Map<string, Set<string>>();

function rank(p: LlmPolicy, op: string, impl: LlmImpl): number {
  const order = p.order?.[op];
  const list = order ?? p.prefer ?? [];
  let i = list.indexOf(impl.name);
  if (i < 0) i = list.indexOf(impl.kind);
  return i < 0 ? list.length : i;
}

function choose(p: LlmPolicy, op: string, device: string): LlmImpl | undefined {
  const deny = new Set(p.deny ?? []);
  const candidates = (impls.get(op) ?? []).filter((m) => (m.device === device || m.device === '*') && !deny.has(m.kind) && !deny.has(m.name));
  candidates.sort((a, b) => rank(p, op, a) - rank(p, op, b) || b.priority - a.priority || (a.name < b.name ? -1 : 1));
  return candidates[0];
}

function devicesOf(op: string): string[] {
  const set = new Set<string>(['cpu']);
  for (const m of impls.get(op) ?? []) if (m.device !== '*') set.add(m.device);
  return [...set].sort();
}

function rebuild(p: LlmPolicy): Map<string, Map<string, LlmImpl>> {
  const t = new Map<string, Map<string, LlmImpl>>();
  for (const op of impls.keys()) {
    const row = new Map<string, LlmImpl>();
    for (const d of devicesOf(op)) {
      const c = choose(p, op, d);
      if (c) row.set(d, c);
    }
    t.set(op, row);
  }
  return t;
}

function noImpl(op: string, device: string): Error {
  const names = (impls.get(op) ?? []).map((m) => `${m.name} (${m.kind}, ${m.device})`).join(', ') || 'none';
  return new Error(`${op}: no implementation for device ${device} is allowed by the llm dispatch policy ${JSON.stringify(policy)}; registered: ${names}`);
}

/** The implementation the table holds for (op, device); resolved once and cached when absent. */
function selected(op: string, device: string): LlmImpl {
  let row = table.get(op);
  if (!row) table.set(op, (row = new Map()));
  let impl = row.get(device);
  if (!impl) {
    impl = choose(policy, op, device);
    if (!impl) throw noImpl(op, device);
    row.set(device, impl);
  }
  return impl;
}

function wire(opName: string, device: string): void {
  let wired = wiredDevices.get(opName);
  if (!wired) wiredDevices.set(opName, (wired = new Set()));
  if (wired.has(device)) return;
  wired.add(device);
  const op = getOp(opName);
  if (device === '*') {
    setDecomposition(op, (...args: readonly unknown[]) => {
      const dev = firstDevice(args);
      const ctx: KernelContext = { op: opName, out: op.meta(...(args as never[])) as MetaResult };
      return selected(opName, dev).fn(ctx, ...args) as never;
    });
  } else {
    registerKernel(op, device as DeviceType, ((ctx: KernelContext, ...args: readonly unknown[]) => selected(opName, device).fn(ctx, ...args)) as never);
  }
}

function firstDevice(args: readonly unknown[]): string {
  for (const a of args) {
    if (a !== null && typeof a === 'object' && 'device' in a && 'shape' in a) return (a as Tensor).device.type;
  }
  return 'cpu';
}

/** Registers an implementation of a library op (names are unique per op). */
export function registerLlmImpl(op: string, impl: LlmImpl): void {
  const list = impls.get(op) ?? [];
  if (list.some((m) => m.name === impl.name)) throw new Error(`registerLlmImpl: op '${op}' already has an implementation named '${impl.name}'`);
  list.push(impl);
  impls.set(op, list);
  wire(op, impl.device);
  // While frozen the table keeps its choices; a new implementation takes effect on thaw.
  if (!frozen) table = rebuild(policy);
  tableVersion++;
}

export function llmImpls(op: string): readonly LlmImpl[] {
  return impls.get(op) ?? [];
}

/** The implementation the current table uses for (op, device type). */
export function llmChoice(op: string, device: DeviceType = 'cpu'): LlmImpl {
  return selected(op, device);
}

function validatePolicy(p: LlmPolicy, where: string): LlmPolicy {
  if (p === null || typeof p !== 'object' || Array.isArray(p)) throw new TypeError(`${where}: the llm policy must be an object { prefer?, deny?, order? }, got ${JSON.stringify(p)}`);
  const kinds: readonly string[] = ['kernel', 'reference', 'vendor'];
  for (const k of Object.keys(p)) if (!['prefer', 'deny', 'order'].includes(k)) throw new TypeError(`${where}: unknown llm policy field '${k}' (expected prefer, deny, order)`);
  const strList = (v: unknown, name: string): void => {
    if (v !== undefined && (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))) throw new TypeError(`${where}: llm policy '${name}' must be a list of strings, got ${JSON.stringify(v)}`);
  };
  strList(p.prefer, 'prefer');
  for (const k of p.prefer ?? []) if (!kinds.includes(k)) throw new TypeError(`${where}: llm policy 'prefer' lists unknown kind '${k}' (expected ${kinds.join(', ')})`);
  strList(p.deny, 'deny');
  if (p.order !== undefined) {
    if (p.order === null || typeof p.order !== 'object' || Array.isArray(p.order)) throw new TypeError(`${where}: llm policy 'order' must map op names to lists, got ${JSON.stringify(p.order)}`);
    for (const [op, list] of Object.entries(p.order)) strList(list, `order.${op}`);
  }
  return { prefer: p.prefer ? [...p.prefer] : undefined, deny: p.deny ? [...p.deny] : undefined, order: p.order ? { ...p.order } : undefined };
}

/** Replaces the policy (merged over nothing: omitted fields mean no preference). Throws while frozen. */
export function setLlmPolicy(p: LlmPolicy): void {
  if (frozen) {
    throw new Error('setLlmPolicy: the llm dispatch policy is frozen (kiln.compile froze it so compiled programs stay valid); call kiln.llm.thawLlmPolicy() first');
  }
  policy = validatePolicy(p, 'setLlmPolicy');
  table = rebuild(policy);
  tableVersion++;
}

/** Back to the default policy (prefer vendor, then library kernels, then references). */
export function resetLlmPolicy(): void {
  setLlmPolicy(DEFAULT_POLICY);
}

export function getLlmPolicy(): LlmPolicy {
  return policy;
}

/** Pins the current choices (idempotent). kiln.compile calls this before its first capture. */
export function freezeLlmPolicy(): void {
  frozen = true;
}

export function thawLlmPolicy(): void {
  frozen = false;
  table = rebuild(policy);
  tableVersion++;
}

export function isLlmPolicyFrozen(): boolean {
  return frozen;
}

/** sha256 of the manifest and the chosen implementation per (op, device): part of compile-cache keys. */
let hashMemo: { key: string; hash: string } | undefined;
let tableVersion = 0;

export function llmManifestHash(): string {
  // Compile-cache keys ask for this per kernel: reuse it until the manifest or the choices change.
  const key = `${manifestVersion()}:${tableVersion}:${frozen ? 'f' : 't'}`;
  if (hashMemo?.key === key) return hashMemo.hash;
  const hash = computeHash();
  // Unfrozen tables fill lazily (new devices), so only a frozen hash is cached.
  if (frozen) hashMemo = { key, hash };
  return hash;
}

function computeHash(): string {
  const choices: string[] = [];
  for (const op of [...impls.keys()].sort()) {
    for (const d of devicesOf(op)) {
      const c = table.get(op)?.get(d) ?? choose(policy, op, d);
      choices.push(`${op}@${d}=${c ? c.name : '-'}`);
    }
  }
  return createHash('sha256').update(manifestText()).update('\n--\n').update(choices.join('\n')).digest('hex');
}

/** Reads KILN_LLM_POLICY (JSON) once at load; a malformed value is an error that names the variable. */
export function policyFromEnv(value: string | undefined): LlmPolicy | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (e) {
    throw new Error(`KILN_LLM_POLICY: expected JSON like {"prefer":["reference"],"deny":["vendor"],"order":{"llm.rmsNorm":["cpu-kernel"]}}, got ${JSON.stringify(value)} (${(e as Error).message})`);
  }
  return validatePolicy(parsed as LlmPolicy, 'KILN_LLM_POLICY');
}

const fromEnv = policyFromEnv(getOption('KILN_LLM_POLICY'));
if (fromEnv) policy = fromEnv;
