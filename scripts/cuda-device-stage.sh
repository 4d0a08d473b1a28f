#!/usr/bin/env bash
# Stages this worktree's build for the device tool, which sends the session's main checkout, not a
# helper's worktree: copies .device/ (node, node_modules, run.sh), dist/ and package.json into
# <main>/.device/wt-cuda/ (ignored by main's .gitignore). Then run with carry [".device/wt-cuda"] and
#   cd .device/wt-cuda && bash .device/run.sh node --test dist/test/cuda-ops.test.js
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
main=${KILN_MAIN_CHECKOUT:-/work/main}
dst="$main/.device/wt-cuda"
git -C "$main" check-ignore -q "$dst/x" || { echo "$dst is not ignored in $main; refusing" >&2; exit 1; }
rm -rf "$dst" && mkdir -p "$dst"
cp -a "$src/.device" "$src/dist" "$src/package.json" "$dst/"
echo "staged $(du -sh "$dst" | cut -f1) in $dst"
