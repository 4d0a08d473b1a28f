#!/usr/bin/env node
/**
 * The `kiln` command. `kiln info`: accelerators, their properties, memory, and a short eager demo.
 * `kiln bench`: the benchmark workloads (eager for now), a table and an optional JSON report.
 * `kiln generate`: greedy generation from prompt ids (a model folder or seeded random weights).
 * `kiln cache info|clear`: the on-disk cache's folder, size and cap; emptying it.
 * `kiln serve`: the OpenAI-compatible HTTP server; it runs until SIGTERM/SIGINT, so main() may
 * return a promise of the exit code.
 */
import { parseArgs } from 'node:util';
import * as kiln from '../index.js';
import { runInfo } from './info.js';
import { runBench } from './bench.js';
import { runCache } from './cache.js';
import { runGenerate } from './generate.js';
import { runServe } from './serve.js';

const USAGE = `Usage: kiln <command> [options]

Commands:
  info [--json] [--device <d>]   accelerators found, their properties, and a short eager demo
  bench [options]                time the benchmark workloads (kiln bench --help for options)
  generate [folder] [options]    generate token ids (kiln generate --help for options)
  serve [folder] [options]       OpenAI-compatible HTTP server (kiln serve --help for options)
  cache info|clear [--json]      the on-disk cache: folder, entries, bytes, size cap; or empty it
  help                           this message

Options:
  --version                      print the version`;

function main(argv: string[]): number | Promise<number> {
  // bench parses its own options.
  if (argv[0] === 'bench') return runBench(argv.slice(1));
  if (argv[0] === 'generate') return runGenerate(argv.slice(1));
  if (argv[0] === 'serve') return runServe(argv.slice(1));
  if (argv[0] === 'cache') return runCache(argv.slice(1));
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      device: { type: 'string' },
      version: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.version) {
    console.log(kiln.version);
    return 0;
  }
  const command = positionals[0] ?? 'help';
  switch (command) {
    case 'info':
      return runInfo({ json: values.json ?? false, device: values.device });
    case 'bench':
      return runBench(argv.filter((a, i) => i !== argv.indexOf('bench')));
    case 'help':
      console.log(USAGE);
      return 0;
    default:
      console.error(`kiln: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

const fail = (e: unknown): void => {
  console.error(`kiln: ${(e as Error).message}`);
  process.exitCode = 1;
};
try {
  const code = main(process.argv.slice(2));
  // serve resolves after a graceful shutdown: exit then, whatever handles (devices, pools) remain.
  if (typeof code === 'number') process.exitCode = code;
  else code.then((c) => process.exit(c), fail);
} catch (e) {
  fail(e);
}
