#!/usr/bin/env bash
# Every script under scripts/ answers a wrong argument with its usage line first on stderr, at
# most one more line saying what was wrong, and exit 2; a script that needs arguments answers
# none the same way; -h prints the usage line on stdout, exit 0 (argparse scripts: one call). Fast: every check
# stops at the argument parsing, and the scripts run from a copy of scripts/ in a temporary
# directory, so a script that ignored its arguments could neither build nor write anything
# of the source tree. Scripts that import torch are skipped without it.
# Usage (ctest): cli_scripts.sh FAVOR_BINARY SOURCE_DIR
set -uo pipefail
unset VARIANT_SCRIPT   # set by test_clang.sh / test_blis.sh for their usage line only
src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo"
cp -r "$src/scripts" "$tmp/repo/scripts"
cp -r "$src/python" "$tmp/repo/python"   # scripts/train_mqar.py reads favor.models' file (python/favor/models.py)
rm -rf "$tmp/repo/scripts/__pycache__" "$tmp/repo/scripts/"*/__pycache__
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# Scripts that need arguments (the others do their work when called with none).
needs_args=" sweep.sh sweep_L.sh sweep_m.sh slurm_sweep.sbatch capture_qkv.py diff_results.py
 fit_family.py fit_maps.py head_stats.py plot.py precision_report.py headline.py 
 plot_kernel_bias.py hybrid_report.py "
uses_torch=" capture_qkv.py train_tiny_lm.py tiny_lm.py train_mqar.py "
has_torch=1
/usr/bin/python3 -c "import torch" 2>/dev/null || has_torch=0

# expect NAME RC STREAM ARGS...: running scripts/NAME ARGS exits RC and STREAM (out or err)
# starts with "usage: ...NAME..."; on exit 2, stdout is empty and stderr has at most 2 lines.
expect() {
  local name=$1 rc=$2 stream=$3; shift 3
  local got
  (cd "$tmp" && timeout 60 "repo/scripts/$name" "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null)
  got=$?
  local what="scripts/$name${*:+ $*}"
  [ "$got" = "$rc" ] || { fail "$what: exit $got, expected $rc; stderr: $(head -c 300 "$tmp/err")"; return; }
  head -n 1 "$tmp/$stream" | grep -Eq "^usage: .*\\b${name//./\\.}\\b" ||
    fail "$what: first line of std$stream is not a usage line naming $name: '$(head -n 1 "$tmp/$stream")'"
  if [ "$rc" = 2 ]; then
    [ ! -s "$tmp/out" ] || fail "$what: wrote to stdout: $(head -c 200 "$tmp/out")"
    [ "$(wc -l < "$tmp/err")" -le 2 ] || fail "$what: more than 2 lines on stderr: $(head -c 400 "$tmp/err")"
  fi
}

count=0
for path in "$tmp"/repo/scripts/*; do
  name=$(basename "$path")
  [ -d "$path" ] && continue   # a package of a script's (favor_plot/: plot.py's modules)
  [ -x "$path" ] || { fail "scripts/$name is not executable"; continue; }
  if [[ $uses_torch == *" $name "* ]] && [ "$has_torch" = 0 ]; then
    echo "skipped scripts/$name: /usr/bin/python3 has no torch"
    continue
  fi
  if grep -q "argparse.ArgumentParser" "$path"; then
    # argparse answers -h, a wrong argument and missing ones alike: one call checks it (each
    # Python start costs up to a second with torch or matplotlib)
    if [[ $needs_args == *" $name "* ]]; then expect "$name" 2 err; else expect "$name" 2 err --no-such-option; fi
  else
    expect "$name" 0 out -h
    expect "$name" 2 err --no-such-option
    [[ $needs_args != *" $name "* ]] || expect "$name" 2 err
  fi
  count=$((count + 1))
done
[ "$count" -ge 30 ] || fail "only $count scripts checked"

# scripts/run.sh's summary: headline.py on committed result sets of each kind (approximation,
# kernel, timing, per-head at equal budgets, NaN means) prints its three lines.
for set in default fig2_kernel_mse_ratio timing_vs_L trained_heads/layer0/F64 precision_scale_sweep/float16; do
  [ -f "$src/results/$set/run.json" ] || continue
  /usr/bin/python3 "$tmp/repo/scripts/headline.py" "$src/results/$set" > "$tmp/out" 2> "$tmp/err" ||
    { fail "headline.py results/$set: $(head -c 300 "$tmp/err")"; continue; }
  [ "$(wc -l < "$tmp/out")" = 3 ] && head -n 1 "$tmp/out" | grep -q "^wrote $src/results/$set/ in " ||
    fail "headline.py results/$set: $(head -c 300 "$tmp/out")"
done
# The README's main command prints its few useful lines, not the build's progress (issue 56):
# run only against the Release build it uses (build/favor), which is then up to date.
if [ "$(realpath -m "$1")" = "$(realpath -m "$src/build/favor")" ]; then
  "$src/scripts/run.sh" "$src/configs/default.json" --out "$tmp/run" > "$tmp/out" 2> "$tmp/err" < /dev/null ||
    fail "scripts/run.sh: exit $?: $(tail -c 400 "$tmp/err")"
  lines=$(cat "$tmp/out" "$tmp/err" | wc -l)
  [ "$lines" -le 6 ] || fail "scripts/run.sh printed $lines lines (at most 6): $(head -c 600 "$tmp/err")"
  ! grep -q "Building CXX\|Linking CXX" "$tmp/out" "$tmp/err" || fail "scripts/run.sh printed the build's progress"
  [ -f "$tmp/run/summary.csv" ] || fail "scripts/run.sh wrote no summary.csv into --out"
fi
[ "$fails" = 0 ] || exit 1
echo "ok: $count scripts print their usage line"
