/**
 * The ```sh blocks of the docs as commands, for test/docs-examples.test.ts. Lines are split the
 * way a POSIX shell would for the subset the docs use (quotes, backslash continuations, `#`
 * comments, `VAR=value` prefixes, `&&` chains); any other shell syntax (a pipe, `;`, redirection,
 * substitution) is an error, which is how `--size tiny|cpu|full` (a pipe into a command `cpu`)
 * gets caught. Each command is then checked against what exists: npm scripts in package.json,
 * `kiln` subcommands and their flags (parsed by the CLI's own strict parser), files, and KILN_*
 * variables with values their declaration accepts. The result says how to run it for real, or
 * why the test cannot (then the block must carry a docs-test mark).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseBenchArgs } from '../../src/cli/bench.js';
import { OPTIONS, parseOption, type OptionName } from '../../src/runtime/config.js';
import type { Mark } from './doc-blocks.js';

export interface ShellCommand {
  readonly env: Readonly<Record<string, string>>;
  readonly argv: readonly string[];
}

/** A checked command: `run` is the argv to execute (the program first), or why it is not run. */
export type CommandPlan = { run: string[]; env: Record<string, string> } | { skip: string };

const ENV_OK = new Set(['LD_LIBRARY_PATH', 'CUDA_HOME', 'CUDA_PATH', 'VK_ICD_FILENAMES']);

/** Splits one block into `&&` chains of commands (one chain per logical line). */
export function parseShell(code: string): ShellCommand[][] {
  const chains: ShellCommand[][] = [];
  for (const line of code.replace(/\\\n/g, ' ').split('\n')) {
    const words = tokenize(line);
    if (words.length === 0) continue;
    const chain: ShellCommand[] = [];
    let cur: string[] = [];
    for (const w of [...words, '&&']) {
      if (w !== '&&') {
        cur.push(w);
        continue;
      }
      if (cur.length === 0) throw new Error(`empty command in '${line.trim()}'`);
      chain.push(toCommand(cur));
      cur = [];
    }
    chains.push(chain);
  }
  return chains;
}

/** Words of one line; `&&` comes back as its own word. Quotes are removed, nothing is expanded. */
function tokenize(line: string): string[] {
  const words: string[] = [];
  let w = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'" || c === '"') {
      const end = line.indexOf(c, i + 1);
      if (end < 0) throw new Error(`unterminated ${c} in '${line.trim()}'`);
      const quoted = line.slice(i + 1, end);
      if (c === '"' && /[$`\\]/.test(quoted)) throw new Error(`expansion inside "..." in '${line.trim()}' (use single quotes)`);
      w += quoted;
      inWord = true;
      i = end;
    } else if (c === ' ' || c === '\t') {
      if (inWord) words.push(w);
      w = '';
      inWord = false;
    } else if (c === '#' && !inWord) {
      break; // a comment to the end of the line
    } else if (c === '&' && line[i + 1] === '&' && !inWord) {
      words.push('&&');
      i++;
    } else if ('|;&<>`$(){}*?'.includes(c) && !(c === '*' && inWord) && !(c === '?' && inWord)) {
      throw new Error(`'${c}' in '${line.trim()}': the docs use plain commands (no pipes, lists, redirection or expansion); write alternatives out as separate lines or in prose`);
    } else {
      w += c;
      inWord = true;
    }
  }
  if (inWord) words.push(w);
  return words;
}

function toCommand(words: string[]): ShellCommand {
  const env: Record<string, string> = {};
  let k = 0;
  for (; k < words.length; k++) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(words[k]!);
    if (!m) break;
    env[m[1]!] = m[2]!;
  }
  if (k === words.length) throw new Error(`only variable assignments: '${words.join(' ')}'`);
  return { env, argv: words.slice(k) };
}

export interface CheckContext {
  readonly root: string;
  /** The `kiln` subcommands listed by `kiln help`. */
  readonly cliCommands: readonly string[];
  readonly marks: readonly Mark[];
}

/** The `kiln` subcommands, from the usage text of the built CLI. */
export function kilnCommands(root: string): string[] {
  const r = spawnSync(process.execPath, [cliPath(root), 'help'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`kiln help failed: ${r.stderr}`);
  const section = r.stdout.split(/\n\s*\n/).find((s) => s.startsWith('Commands:')) ?? '';
  return section.split('\n').slice(1).map((l) => l.trim().split(/\s+/)[0]!).filter((c) => c.length > 0);
}

function cliPath(root: string): string {
  const pkg = readPackage(root);
  return join(root, pkg.bin.kiln);
}

interface PackageJson {
  name: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
}

function readPackage(root: string): PackageJson {
  return JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;
}

/** Checks one command against the repository; throws with the reason when it cannot work. */
export function checkCommand(cmd: ShellCommand, ctx: CheckContext): CommandPlan {
  for (const [name, value] of Object.entries(cmd.env)) {
    if (ENV_OK.has(name)) continue;
    if (!(name in OPTIONS)) throw new Error(`${name} is not a declared KILN_* option (src/runtime/config.ts)`);
    parseOption(name as OptionName, value); // throws on a value the option does not accept
  }
  const [prog, ...args] = cmd.argv;
  const env = { ...cmd.env };
  const pkg = readPackage(ctx.root);
  const exists = (p: string): void => {
    if (!existsSync(join(ctx.root, p))) throw new Error(`${p} does not exist`);
  };
  switch (prog) {
    case 'npm':
      return checkNpm(args, pkg, ctx);
    case 'npx': {
      if (args[0] === '--') args.shift();
      const bin = args[0];
      if (bin === undefined || !(bin in pkg.bin)) throw new Error(`npx ${bin}: not a bin of package.json (${Object.keys(pkg.bin).join(', ')})`);
      checkKiln(args.slice(1), ctx);
      return { run: [process.execPath, join(ctx.root, pkg.bin[bin]!), ...args.slice(1)], env };
    }
    case 'node': {
      if (args[0] === '--test') {
        for (const g of args.slice(1)) if (globFiles(ctx.root, g).length === 0) throw new Error(`node --test ${g}: no file matches`);
        return { skip: 'runs a test suite' };
      }
      const script = args.find((a) => !a.startsWith('-'));
      if (script === undefined) throw new Error('node without a script');
      exists(script);
      return { run: [process.execPath, ...args], env };
    }
    case 'bash':
    case 'python3':
      exists(args[0] ?? '');
      return { skip: `${prog} script` };
    case 'curl': {
      if (!ctx.marks.includes('server')) throw new Error('curl needs a running server: mark the block `server`');
      const url = args.find((a) => /^https?:\/\//.test(a));
      if (!url || !/^http:\/\/(127\.0\.0\.1|localhost):\d+\//.test(url)) throw new Error(`curl: expected a local server URL, got ${url}`);
      return { skip: 'talks to a server' };
    }
    default:
      throw new Error(`'${prog}' is not a command the docs test knows (teach test/helpers/doc-commands.ts)`);
  }
}

function checkNpm(args: string[], pkg: PackageJson, ctx: CheckContext): CommandPlan {
  const [sub, ...rest] = args;
  if (sub === 'ci' && rest.length === 0) return { skip: 'installs dependencies' };
  if ((sub === 'install' || sub === 'i') && rest.length === 1) {
    if (rest[0] !== pkg.name) throw new Error(`npm install ${rest[0]}: the package is ${pkg.name}`);
    return { skip: 'installs from the registry' };
  }
  if (sub === 'test' && rest.length === 0) return { skip: 'the whole test suite' };
  if (sub === 'run' && rest[0] !== undefined) {
    const script = rest[0];
    if (!(script in pkg.scripts)) throw new Error(`npm run ${script}: no such script in package.json`);
    const extra = rest.slice(1);
    if (extra.length > 0 && extra[0] !== '--') throw new Error(`npm run ${script}: options go after --`);
    const cli = /node dist\/src\/cli\/main\.js (\w+)$/.exec(pkg.scripts[script]!);
    if (cli) checkKiln([cli[1]!, ...extra.slice(1)], ctx);
    else if (extra.length > 0) throw new Error(`npm run ${script} takes no options`);
    return { skip: `npm run ${script} builds first` };
  }
  throw new Error(`npm ${args.join(' ')}: not a form the docs use (npm ci, npm install ${pkg.name}, npm test, npm run <script>)`);
}

/** A `kiln` command line: the subcommand exists and its flags parse with the CLI's own parser. */
function checkKiln(args: string[], ctx: CheckContext): void {
  const [sub, ...rest] = args;
  if (sub === undefined || !ctx.cliCommands.includes(sub)) throw new Error(`kiln ${sub}: not a command of kiln help (${ctx.cliCommands.join(', ')})`);
  if (sub === 'bench') {
    parseBenchArgs(rest); // throws on unknown flags and on bad values (sizes, dtypes, workloads)
    return;
  }
  if (sub === 'generate' || sub === 'serve') {
    // Both parse strictly (unknown or valueless flags throw) before they look at --help.
    const r = spawnSync(process.execPath, [cliPath(ctx.root), sub, ...rest, '--help'], { encoding: 'utf8', cwd: ctx.root });
    if (r.status !== 0) throw new Error(`kiln ${sub} ${rest.join(' ')}: ${r.stderr.trim()}`);
  }
}

/** Files matching a path whose last part may hold `*` wildcards. */
function globFiles(root: string, pattern: string): string[] {
  const dir = join(root, dirname(pattern));
  if (!existsSync(dir)) return [];
  const re = new RegExp('^' + basename(pattern).split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return readdirSync(dir).filter((f) => re.test(f));
}
