#!/usr/bin/env node
/**
 * Writes the package.json and package-lock.json of scripts/pack-check.sh's throwaway app, so that
 * `npm ci --offline` can install the packed tarball with no registry: every dependency is pinned
 * to the version and integrity the repo's own lock already has, and those tarballs are in npm's
 * cache after the repo's `npm ci`. (A plain `npm install <tarball>` would have to resolve the
 * dependencies' semver ranges, which needs registry metadata that `npm ci` never caches.)
 *
 * Usage: node scripts/pack-check-lock.mjs <repo root> <npm pack --json output> <app folder>
 * The app depends on kilnjs (the tarball, which must lie in the app folder) and, for its type
 * check, on the repo's @types/node.
 */
import fs from 'node:fs';
import path from 'node:path';

const [root, packJson, app] = process.argv.slice(2);
if (!root || !packJson || !app) {
  console.error('usage: pack-check-lock.mjs <repo root> <npm pack --json output> <app folder>');
  process.exit(2);
}
const packed = JSON.parse(fs.readFileSync(packJson, 'utf8'))[0];
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const repoLock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')).packages;
if (!fs.existsSync(path.join(app, packed.filename))) throw new Error(`${packed.filename} is not in ${app}`);

/** The lock key a dependency `name` of the package at lock key `from` resolves to (node's lookup). */
function resolve(from, name) {
  for (let at = from; ; ) {
    const key = `${at ? `${at}/` : ''}node_modules/${name}`;
    if (repoLock[key]) return key;
    if (!at) throw new Error(`package-lock.json has no entry for ${name} (needed by ${from || 'the root'}); run npm install`);
    const i = at.lastIndexOf('/node_modules/');
    at = i < 0 ? '' : at.slice(0, i);
  }
}

/** Copies the entries reachable from `names` (dependencies and optional ones) into `out`. */
function closure(names, dev, out) {
  const todo = names.map((n) => resolve('', n));
  while (todo.length > 0) {
    const key = todo.pop();
    if (out[key] && !(out[key].dev && !dev)) continue;
    const entry = { ...repoLock[key] };
    if (dev) entry.dev = true;
    else delete entry.dev;
    delete entry.devOptional;
    out[key] = entry;
    for (const dep of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) todo.push(resolve(key, dep));
  }
}

const deps = pkg.dependencies ?? {};
const typesNode = repoLock['node_modules/@types/node']?.version;
if (!typesNode) throw new Error('package-lock.json has no @types/node');
const appPkg = {
  name: 'kiln-pack-app',
  private: true,
  type: 'module',
  dependencies: { [pkg.name]: `file:${packed.filename}` },
  devDependencies: { '@types/node': typesNode },
};
const packages = {
  '': { name: appPkg.name, dependencies: appPkg.dependencies, devDependencies: appPkg.devDependencies },
  [`node_modules/${pkg.name}`]: {
    version: packed.version,
    resolved: `file:${packed.filename}`,
    integrity: packed.integrity,
    license: pkg.license,
    dependencies: deps,
    bin: pkg.bin,
    engines: pkg.engines,
  },
};
closure(Object.keys(deps), false, packages);
closure(['@types/node'], true, packages);
fs.writeFileSync(path.join(app, 'package.json'), `${JSON.stringify(appPkg, null, 2)}\n`);
fs.writeFileSync(path.join(app, 'package-lock.json'), `${JSON.stringify({ name: appPkg.name, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`);
