#!/usr/bin/env bash
# Every PyTorch form of the LLM library's references (scripts/bench_llm_pytorch.py: forward_native,
# torch.compile of it in default / reduce-overhead / max-autotune mode, F.rms_norm, add+F.rms_norm),
# resumable: about 270 compiles do not fit one 10-minute device call, so each call times the rows
# its file lacks and stops before the limit. The file is relative to the repository root, whose
# untracked files travel to the device machine: after each call copy the returned
# $OUT/<file> back over it, and call again until the log ends with "complete".
#   bash scripts/device/llm-torch-forms.sh [file (default llm-torch-forms.json)] [seconds (default 560)]
# Then, with a Kiln side from the same machine (dist/bench/llm-cuda.js --json llm-kiln.json):
#   python3 scripts/bench_llm_merge.py llm-torch-forms.json llm-kiln.json llm-bench.json
set -uo pipefail
file=${1:-llm-torch-forms.json}
budget=${2:-560}
out=${OUT:-/tmp/out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
timeout "$budget" python3 scripts/bench_llm_pytorch.py --json "$file" --reps 50 --resume > "$out/llm-torch-forms.txt" 2>&1
echo "bench_llm_pytorch rc=$? ($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$file" 2>/dev/null || echo 0) rows in $file)"
[ -f "$file" ] && cp "$file" "$out/"
tail -n 3 "$out/llm-torch-forms.txt"
