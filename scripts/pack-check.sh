#!/usr/bin/env bash
# Is the npm package usable as published? (issue #19; .ci/run calls this after the tests.)
#  1. `npm pack` (prepack builds, the browser bundle too) and check the tarball: dist/src JavaScript
#     with a .d.ts for every .js, the browser bundle (dist/browser/kiln.js and the webgpu device
#     worker it starts, webgpu-device.js; issue #20), README, LICENSE, CHANGELOG, package.json, and
#     nothing else (no tests, no TypeScript sources, no source maps: they point at src/*.ts, which
#     is not shipped).
#  2. A fresh app in a temp folder (type module, strict NodeNext tsconfig, examples/pack-app/)
#     installs the tarball with `npm ci --offline`: its lock pins the dependencies to the repo
#     lock's versions, whose tarballs the repo's `npm ci` left in npm's cache
#     (scripts/pack-check-lock.mjs). Only if that fails (a cleaned cache) does it retry online.
#  3. The repo's tsc type-checks the app against the installed .d.ts (no skipLibCheck) and emits
#     it; node runs it (compile, nn, optim, io, models), and the `kiln` bin answers --version.
#  4. The browser entry (issue #20): `kilnjs/browser`, and `kilnjs` under the "browser" condition,
#     resolve to the installed bundle while plain `kilnjs` stays the Node entry; a browser-flavoured
#     tsconfig (WebWorker lib, no Node types, bundler resolution) type-checks an import of
#     `kilnjs/browser`; and the system's headless Chromium loads it from a page served out of the
#     app (scripts/pack-check-browser.mjs) and computes a matmul on the WebAssembly path, on the
#     page and in a worker. Without a Chromium that last part is skipped, saying so.
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
for f in package.json README.md LICENSE CHANGELOG.md dist/src/index.js dist/src/index.d.ts dist/src/cli/main.js dist/browser/kiln.js dist/browser/webgpu-device.js; do
  grep -qx "$f" "$work/files.txt" || fail "$tarball lacks $f"
done
if grep -Ev '^(package\.json|README\.md|LICENSE|CHANGELOG\.md|dist/src/.*\.(js|d\.ts)|dist/browser/(kiln|webgpu-device)\.js)$' "$work/files.txt" > "$work/extra.txt"; then
  fail "$tarball ships files it should not: $(head -5 "$work/extra.txt" | tr '\n' ' ')"
fi
js=$(grep -c '^dist/src/.*\.js$' "$work/files.txt")
dts=$(grep -c '\.d\.ts$' "$work/files.txt")
[ "$js" = "$dts" ] || fail "$js .js files but $dts .d.ts files"
unpacked=$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].unpackedSize))' "$work/pack.json")
[ "$unpacked" -lt $((8 * 1024 * 1024)) ] || fail "unpacked size $unpacked bytes is over 8 MiB"
bundle=$(tar -xzOf "$work/$tarball" package/dist/browser/kiln.js | wc -c)
echo "pack-check: $tarball: $js modules with types, a $((bundle / 1024)) KiB browser bundle, $(wc -l < "$work/files.txt") files, $((unpacked / 1024)) KiB unpacked"

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

# 4. The browser entry.
resolve() { (cd "$app" && node "$@" --input-type=module -e 'process.stdout.write(import.meta.resolve(process.argv[1]))' "$spec"); }
spec=kilnjs/browser; browser_entry=$(resolve)
spec=kilnjs; browser_cond=$(resolve --conditions=browser); node_entry=$(resolve)
case "$browser_entry" in file://*/node_modules/kilnjs/dist/browser/kiln.js) ;; *) fail "kilnjs/browser resolves to $browser_entry" ;; esac
[ "$browser_cond" = "$browser_entry" ] || fail "kilnjs under the browser condition resolves to $browser_cond, not the bundle"
case "$node_entry" in file://*/node_modules/kilnjs/dist/src/index.js) ;; *) fail "kilnjs (Node) resolves to $node_entry" ;; esac
spec=kilnjs/browser/webgpu-device.js; device_entry=$(resolve)
[ "$device_entry" = "${browser_entry%/kiln.js}/webgpu-device.js" ] || fail "kilnjs/browser/webgpu-device.js resolves to $device_entry"
mkdir -p "$app/web"
cat > "$app/web/worker.ts" <<'EOF'
import * as kiln from 'kilnjs/browser';
const webgpu = await kiln.prepareWebgpu();
const device = webgpu.available ? 'webgpu' : 'cpu';
const c = kiln.ones([2, 3]).to(device).matmul(kiln.ones([3, 2]).to(device)).toArray();
self.postMessage({ c, reason: webgpu.reason });
EOF
cat > "$app/web/tsconfig.json" <<'EOF'
{ "compilerOptions": { "target": "ES2022", "module": "ESNext", "moduleResolution": "Bundler", "lib": ["ES2022", "WebWorker"], "types": [], "strict": true, "skipLibCheck": true, "noEmit": true }, "include": ["worker.ts"] }
EOF
node "$root/node_modules/typescript/bin/tsc" -p "$app/web/tsconfig.json" || fail "a browser tsconfig (WebWorker lib, no Node types) does not type-check an import of kilnjs/browser"
node scripts/pack-check-browser.mjs "$app" "$browser_entry"
echo "pack-check: ok in $((SECONDS - t0)) s"
