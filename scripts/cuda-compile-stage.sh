#!/usr/bin/env bash
# Stages this worktree's build for the device tool (which sends the session's main checkout, not a
# helper's worktree) into <main>/.device/wt-cudaint/: .device/ (node, node_modules, run.sh), dist/,
# scripts/ and package.json. Then run with carry [".device/wt-cudaint"] and
#   cd .device/wt-cudaint && bash .device/run.sh bash scripts/cuda-compile-device.sh tests,kiln 250
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
main=${KILN_MAIN_CHECKOUT:-/work/main}
dst="$main/.device/wt-cudaint"
git -C "$main" check-ignore -q "$dst/x" || { echo "$dst is not ignored in $main; refusing" >&2; exit 1; }
rm -rf "$dst" && mkdir -p "$dst"
cp -a "$src/.device" "$src/dist" "$src/scripts" "$src/package.json" "$dst/"
echo "staged $(du -sh "$dst" | cut -f1) in $dst"
