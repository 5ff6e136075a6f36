#!/usr/bin/env bash
# Resume: SIGTERM / SIGINT at a random point stop the run after the cells in flight (exit 143 /
# 130, the resume command on stderr, the journal kept, earlier results untouched); --resume
# then writes errors.csv and summary.csv byte-identical to an uninterrupted run. Also: a
# resume with another config is refused, a torn journal line is dropped, a kernel run resumes.
set -euo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
config() {   # 24 cells x $1 trials
  cat > "$tmp/c.json" <<JSON
{"name": "r", "seed": 7, "inputs": {"source": "random", "L": [256, 384], "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}, {"features": "hyperbolic"}],
 "m": [8, 32], "trials": $1, "metrics": ["output_mse", "attention_tv", "attention_kl"]}
JSON
}
# Trials such that a run lasts at least ~1 s here (so a signal lands inside it), doubling
# from 8 up to 64: a Release build needs about 32 to 64, a sanitizer build far fewer.
trials=8
while :; do
  config $trials
  rm -rf "$tmp/full"
  start=$(date +%s%N)
  "$favor" run "$tmp/c.json" --out "$tmp/full" --threads 2 --quiet
  ms=$((($(date +%s%N) - start) / 1000000))   # how long a run takes here
  [ $ms -lt 1000 ] && [ $trials -lt 64 ] || break
  trials=$((trials * 2))
done
cells=$((24 * trials))
pause() { sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }   # milliseconds
stopped=0
# Three tries: SIGTERM, SIGINT, and SIGTERM into an OUT that holds an earlier result set.
for i in 1 2 3; do
  out=$tmp/part$i
  sig=TERM want=143; [ $i = 2 ] && sig=INT want=130
  # An earlier result set in OUT must survive the interruption untouched.
  [ $i = 3 ] && cp -r "$tmp/full" "$out" && "$favor" run "$tmp/c.json" --seed 1 --trials 1 --out "$out" --quiet &&
    cp "$out/errors.csv" "$tmp/earlier.csv"
  "$favor" run "$tmp/c.json" --out "$out" --threads 2 --quiet 2>"$tmp/err" &
  pid=$!
  pause $((ms * 15 / 100 + RANDOM % (ms / 2 + 1)))   # somewhere in the run (15% .. 65%)
  kill -$sig $pid 2>/dev/null || true
  set +e; wait $pid; rc=$?; set -e
  if [ $rc = 0 ]; then
    echo "cli_resume: try $i finished before the signal"
  else
    [ $rc = $want ] || fail "try $i: SIG$sig gave exit $rc [$(cat "$tmp/err")]"
    grep -q "^favor: stopped by SIG$sig after [0-9]* of $cells cell trials; they are kept in $out/journal.jsonl" "$tmp/err" ||
      fail "try $i: message [$(cat "$tmp/err")]"
    grep -q "^favor: continue with: .*--out $out --threads 2 --quiet --resume$" "$tmp/err" || fail "try $i: no resume command"
    [ -f "$out/journal.jsonl" ] || fail "try $i: no journal"
    if [ $i = 3 ]; then cmp -s "$tmp/earlier.csv" "$out/errors.csv" || fail "try 3: earlier results changed"; fi
    stopped=$((stopped + 1))
    "$favor" run "$tmp/c.json" --out "$out" --threads 1 --resume --quiet
  fi
  for f in errors.csv summary.csv; do cmp "$tmp/full/$f" "$out/$f" || fail "try $i: $f differs after resume"; done
  [ ! -e "$out/journal.jsonl" ] || fail "try $i: journal left in the finished set"
done
[ $stopped -ge 2 ] || fail "only $stopped of 3 runs were interrupted (timing?)"

# Another config, or another shard, is refused; a torn last line is dropped.
"$favor" run "$tmp/c.json" --out "$tmp/other" --threads 1 --quiet 2>/dev/null & pid=$!
for _ in $(seq 1 500); do   # until a few cells are journaled
  [ -f "$tmp/other/journal.jsonl" ] && [ "$(wc -l < "$tmp/other/journal.jsonl")" -ge 4 ] && break
  sleep 0.02
done
kill -TERM $pid 2>/dev/null || true; wait $pid || true
[ -f "$tmp/other/journal.jsonl" ] || fail "no journal to test with"
set +e
err=$("$favor" run "$tmp/c.json" --trials 5 --out "$tmp/other" --resume 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "journal.jsonl: written by a different run (config.trials: $trials vs 5); rerun without --resume" <<<"$err" ||
  fail "other config: rc=$rc [$err]"
set +e
err=$("$favor" run "$tmp/c.json" --shard 1/2 --out "$tmp/other" --resume 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "different run (shard.count: 1 vs 2)" <<<"$err" || fail "other shard: rc=$rc [$err]"
printf '{"cell":3,"tr' >> "$tmp/other/journal.jsonl"
"$favor" run "$tmp/c.json" --out "$tmp/other" --resume --quiet
cmp "$tmp/full/errors.csv" "$tmp/other/errors.csv" || fail "torn journal: errors.csv differs"

# A kernel run resumes too (stopped at 30% of its measured length).
cat > "$tmp/k.json" <<'JSON'
{"name": "k", "experiment": "kernel", "d": [4, 8], "m": [4, 16], "norm": [0.5, 1], "angle": [0.5, 1.5], "trials": 1000,
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}]}
JSON
start=$(date +%s%N)
"$favor" run "$tmp/k.json" --out "$tmp/kfull" --quiet
kms=$((($(date +%s%N) - start) / 1000000))
"$favor" run "$tmp/k.json" --out "$tmp/kpart" --quiet 2>/dev/null & pid=$!
pause $((kms * 30 / 100)); kill -TERM $pid 2>/dev/null || true; set +e; wait $pid; rc=$?; set -e
[ $rc = 0 ] || [ $rc = 143 ] || fail "kernel: exit $rc"
[ $rc = 0 ] || { [ -f "$tmp/kpart/journal.jsonl" ] || fail "kernel: no journal"; }
[ $rc = 0 ] || "$favor" run "$tmp/k.json" --out "$tmp/kpart" --resume --quiet
cmp "$tmp/kfull/summary.csv" "$tmp/kpart/summary.csv" || fail "kernel: summary.csv differs after resume"
echo "cli_resume: ok ($stopped of 3 interrupted runs resumed byte for byte; a run of $cells cell trials takes $ms ms; kernel run stopped: $([ $rc = 143 ] && echo yes || echo no), $kms ms)"
