#!/usr/bin/env bash
# Is the npm package usable as published? (issue #19; .ci/run calls this after the tests.)
#  1. `npm pack` (prepack builds) and check the tarball: dist/src JavaScript with a .d.ts for every
#     .js, README, LICENSE, CHANGELOG, package.json, and nothing else (no tests, no TypeScript
#     sources, no source maps: they point at src/*.ts, which is not shipped).
#  2. A fresh app in a temp folder (type module, strict NodeNext tsconfig, examples/pack-app/)
#     installs the tarball with `npm ci --offline`: its lock pins the dependencies to the repo
#     lock's versions, whose tarballs the repo's `npm ci` left in npm's cache
#     (scripts/pack-check-lock.mjs). Only if that fails (a cleaned cache) does it retry online.
#  3. The repo's tsc type-checks the app against the installed .d.ts (no skipLibCheck) and emits
#     it; node runs it (compile, nn, optim, io, models), and the `kiln` bin answers --version.
# Runs in a fresh cache folder so the installed package compiles from scratch, as a user's first
# run does. KILN_PACK_CHECK_KEEP=1 keeps the temp folder for a look.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pack-check.XXXXXX")
if [ "${KILN_PACK_CHECK_KEEP:-0}" = 1 ]; then echo "pack-check: keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
t0=$SECONDS
fail() { echo "pack-check: $*" >&2; exit 1; }

# 1. Pack (the prepack build's output goes to stderr; stdout is the JSON report).
npm pack --pack-destination "$work" --json > "$work/pack.json"
tarball=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].filename)' "$work/pack.json")
tar -tzf "$work/$tarball" | sed 's#^package/##' | sort > "$work/files.txt"
for f in package.json README.md LICENSE CHANGELOG.md dist/src/index.js dist/src/index.d.ts dist/src/cli/main.js; do
  grep -qx "$f" "$work/files.txt" || fail "$tarball lacks $f"
done
if grep -Ev '^(package\.json|README\.md|LICENSE|CHANGELOG\.md|dist/src/.*\.(js|d\.ts))$' "$work/files.txt" > "$work/extra.txt"; then
  fail "$tarball ships files it should not: $(head -5 "$work/extra.txt" | tr '\n' ' ')"
fi
js=$(grep -c '\.js$' "$work/files.txt")
dts=$(grep -c '\.d\.ts$' "$work/files.txt")
[ "$js" = "$dts" ] || fail "$js .js files but $dts .d.ts files"
unpacked=$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].unpackedSize))' "$work/pack.json")
[ "$unpacked" -lt $((8 * 1024 * 1024)) ] || fail "unpacked size $unpacked bytes is over 8 MiB"
echo "pack-check: $tarball: $js modules with types, $(wc -l < "$work/files.txt") files, $((unpacked / 1024)) KiB unpacked"

# 2. A fresh app that installs the tarball.
app="$work/app"
mkdir -p "$app"
mv "$work/$tarball" "$app/"
cp examples/pack-app/main.ts examples/pack-app/tsconfig.json "$app/"
node scripts/pack-check-lock.mjs "$root" "$work/pack.json" "$app"
if ! (cd "$app" && npm ci --offline --no-audit --no-fund --loglevel=error > "$work/install.log" 2>&1); then
  echo "pack-check: offline install failed (npm cache lacks a dependency?); retrying with the registry" >&2
  tail -5 "$work/install.log" >&2
  (cd "$app" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
fi

# 3. Type-check and build the app with the repo's TypeScript, run it, and run the bin.
node "$root/node_modules/typescript/bin/tsc" -p "$app/tsconfig.json"
export KILN_CACHE_DIR="$work/cache"
(cd "$app" && node build/main.js)
version=$(cd "$app" && ./node_modules/.bin/kiln --version)
expected=$(node -p 'require("./package.json").version')
[ "$version" = "$expected" ] || fail "kiln --version printed '$version', expected $expected"
echo "pack-check: ok in $((SECONDS - t0)) s"
