#!/usr/bin/env bash
# The suite's reliability bar: a fresh clone of this repository's HEAD, built once, then the whole
# suite RUNS times in a row with a CPU hog (stress-ng) on one core beside it, as a loaded CI machine.
#
#   scripts/test-under-load.sh [runs]     (default 10)
#
# Prints one line per run and "N of RUNS green"; exits 1 unless every run was green. Logs stay in
# the clone's directory, named in the output.
set -u
RUNS=${1:-10}
cd "$(dirname "$0")/.."
if ! command -v stress-ng >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null
  else
    echo "needs: sudo apt-get install -y stress-ng" >&2; exit 1
  fi
fi
CLONE=$(mktemp -d /tmp/portico-under-load.XXXXXX)
git clone -q . "$CLONE" && cd "$CLONE" || exit 1
echo "== $(git log --oneline -1) in $CLONE"
swift build --build-tests >build.log 2>&1 || { echo "build failed: $CLONE/build.log"; exit 1; }
stress-ng --cpu 1 --timeout 0 >/dev/null 2>&1 &
HOG=$!
trap 'kill $HOG 2>/dev/null' EXIT
green=0
for run in $(seq 1 "$RUNS"); do
  if swift test --skip-build >"run-$run.log" 2>&1; then green=$((green + 1)); result=green; else result="RED (run-$run.log)"; fi
  echo "run $run: $result $(grep -E 'Test run with' "run-$run.log" | tail -1 | cut -c1-90)"
done
echo "$green of $RUNS green"
[ "$green" -eq "$RUNS" ]
