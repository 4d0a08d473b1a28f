#!/usr/bin/env bash
# Stages a helper worktree's build for a batched device round (the device tool sends only the main
# checkout, and its tree may not exceed 64 MiB, so each helper's dist/ travels xz-compressed):
#   scripts/device-stage-helper.sh <name> <script> [seconds]
# writes <main>/.device/stage-<name>/{dist.tar.xz, device.sh, budget}. scripts/device-round.sh runs
# every staged dir on the device, one after the other, each under its own time limit.
set -euo pipefail
name=$1; script=$2; budget=${3:-90}
src=$(cd "$(dirname "$0")/.." && pwd)
main=${KILN_MAIN_CHECKOUT:-/work/main}
dst="$main/.device/stage-$name"
git -C "$main" check-ignore -q "$dst/x" || { echo "$dst is not ignored in $main; refusing" >&2; exit 1; }
rm -rf "$dst" && mkdir -p "$dst"
tar -C "$src" -cJf "$dst/dist.tar.xz" dist package.json $( [ -d "$src/test/fixtures" ] && echo test/fixtures ) $( [ -d "$src/scripts" ] && echo scripts )
cp "$script" "$dst/device.sh"
echo "$budget" > "$dst/budget"
echo "staged $(du -sh "$dst" | cut -f1) in $dst (budget ${budget}s)"
