#!/usr/bin/env bash
# The output directory is one result set: what a reader sees is the old set or the new one,
# whole, never a mix, whatever happens to the writer.
#  1. a kernel or timing run into an approximation directory leaves none of its files;
#  2. a full disk (a 64 KB tmpfs when this machine lets us mount one, else an injected
#     write failure) fails with one line and leaves the previous set and nothing else;
#  3. kill -9 at random points of the write phase, 20 times, with and without
#     RENAME_EXCHANGE: the set is always one of the two, and the next run cleans up;
#  4. two concurrent runs into one directory: one refuses (the lock) or they run one after
#     the other; run.json always matches the data;
#  5. a held lock is refused with one line naming the pid; temporaries are never merged.
set -euo pipefail
favor=$1
tmp=$(mktemp -d)
mnt=""
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "c", "seed": 1, "inputs": {"source": "random", "L": [16, 24], "d": 4, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}],
 "m": [4, 8], "trials": 2, "metrics": ["output_mse", "attention_tv"]}
JSON
"$favor" run "$tmp/c.json" --seed 1 --out "$tmp/refA" --quiet
"$favor" run "$tmp/c.json" --seed 2 --out "$tmp/refB" --quiet

# A consistent approximation set: exactly its four files (a journal.jsonl of a run in
# progress may sit beside them), equal to refA or refB, run.json's seed that of the data.
check_set() {   # DIR WHAT
  local d=$1 what=$2 files ref
  files=$(ls -A "$d" | grep -v '^journal.jsonl$' | tr '\n' ' ')
  [ "$files" = "errors.csv run.json summary.csv summary.md " ] || fail "$what: files [$files]"
  for ref in refA refB; do
    if cmp -s "$d/errors.csv" "$tmp/$ref/errors.csv"; then
      cmp -s "$d/summary.csv" "$tmp/$ref/summary.csv" && cmp -s "$d/summary.md" "$tmp/$ref/summary.md" ||
        fail "$what: errors.csv of $ref with other tables"
      local seed; seed=$([ $ref = refA ] && echo 1 || echo 2)
      grep -q "\"seed\": $seed," "$d/run.json" || fail "$what: run.json seed is not $seed like the data"
      echo $ref
      return
    fi
  done
  fail "$what: errors.csv is neither set"
}
no_leftovers() {   # PARENT WHAT
  local left; left=$(ls -A "$1" | grep -E 'favor-(tmp|old|lock)' || true)
  [ -z "$left" ] || fail "$2: leftovers [$left]"
}

# 1. Files of another experiment kind never linger.
cat > "$tmp/k.json" <<'JSON'
{"name": "k", "experiment": "kernel", "d": 4, "m": 4, "norm": 1, "angle": [0.5, 1], "trials": 5,
 "variants": [{"features": "positive"}]}
JSON
cat > "$tmp/t.json" <<'JSON'
{"name": "t", "experiment": "timing", "inputs": {"source": "random", "L": 32, "d": 4}, "m": 4, "repeats": 1,
 "warmup": 0, "variants": [{"features": "exact"}, {"features": "positive"}]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/kinds" --quiet
"$favor" run "$tmp/k.json" --out "$tmp/kinds" --quiet
[ "$(ls -A "$tmp/kinds" | tr '\n' ' ')" = "run.json summary.csv summary.md " ] || fail "kernel run left $(ls "$tmp/kinds")"
"$favor" run "$tmp/t.json" --out "$tmp/kinds" --quiet
[ "$(ls -A "$tmp/kinds" | tr '\n' ' ')" = "run.json timing.csv timing.md " ] || fail "timing run left $(ls "$tmp/kinds")"

# 2. Disk full.
cat > "$tmp/big.json" <<'JSON'
{"name": "big", "seed": 2, "inputs": {"source": "random", "L": 16, "d": 4, "scale": [0.25, 0.5, 0.75, 1.0, 1.25]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}, {"features": "hyperbolic"}],
 "m": [2, 4, 6, 8, 10, 12, 14, 16], "metrics": ["output_mse", "attention_tv", "kernel_mse"]}
JSON
mkdir "$tmp/mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k favor-test "$tmp/mnt" 2>/dev/null; then
  mnt=$tmp/mnt; how="64 KB tmpfs"; inject=()
else
  how="injected failure"; inject=(env FAVOR_TEST_FAIL_WRITE=2)
fi
"$favor" run "$tmp/c.json" --out "$tmp/mnt/out" --quiet
cp -r "$tmp/mnt/out" "$tmp/before"
set +e
err=$("${inject[@]}" "$favor" run "$tmp/big.json" --out "$tmp/mnt/out" --quiet 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q "No space left on device" <<<"$err" ||
  fail "disk full ($how): rc=$rc [$err]"
for f in errors.csv summary.csv summary.md run.json; do
  cmp -s "$tmp/before/$f" "$tmp/mnt/out/$f" || fail "disk full ($how): $f changed"
done
check_set "$tmp/mnt/out" "disk full ($how)" >/dev/null
no_leftovers "$tmp/mnt" "disk full ($how)"
[ "$(ls -A "$tmp/mnt")" = out ] || fail "disk full ($how): $(ls -A "$tmp/mnt")"
# The journal itself does not fit either (5 trials): the same, one line, old set intact.
if [ -n "$mnt" ]; then
  set +e
  err=$("$favor" run "$tmp/big.json" --trials 5 --out "$tmp/mnt/out" --quiet 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q "journal.jsonl: write failed (No space left" <<<"$err" ||
    fail "disk full, journal: rc=$rc [$err]"
  for f in errors.csv summary.csv summary.md run.json; do cmp -s "$tmp/before/$f" "$tmp/mnt/out/$f" || fail "journal full: $f changed"; done
  no_leftovers "$tmp/mnt" "journal full"
  umount "$mnt"; mnt=""
fi
echo "cli_integrity: disk full ($how) ok"

# 3. kill -9 anywhere in the write phase (stretched to ~150 ms by a pause after each step).
out=$tmp/k9/out
mkdir -p "$tmp/k9"
"$favor" run "$tmp/c.json" --seed 1 --out "$out" --quiet
seed=1 missing=0 was_missing=0
for i in $(seq 1 20); do
  seed=$((3 - seed))
  exchange=(); [ $((i % 2)) = 0 ] && exchange=(env FAVOR_TEST_NO_EXCHANGE=1)
  FAVOR_TEST_WRITE_PAUSE_MS=25 "${exchange[@]}" "$favor" run "$tmp/c.json" --seed $seed --out "$out" --quiet &
  pid=$!
  sleep "0.$(printf %03d $((RANDOM % 220)))"
  { kill -9 $pid; wait $pid; } 2>/dev/null || true
  if [ -d "$out" ]; then
    check_set "$out" "kill -9, try $i" >/dev/null
    was_missing=0
  else
    # Only between the two renames of the fallback path (even tries), or when the try before
    # left it so and this one was killed before its start-up restored the old set: either
    # way the old set is beside OUT.
    { [ $((i % 2)) = 0 ] || [ $was_missing = 1 ]; } && ls -A "$tmp/k9" | grep -q '^\.out\.favor-old-' ||
      fail "kill -9, try $i: OUT missing"
    missing=$((missing + 1)) was_missing=1
  fi
done
"$favor" run "$tmp/c.json" --seed 2 --out "$out" --quiet
[ "$(check_set "$out" "after the kills")" = refB ] || fail "after the kills: not the last run's set"
[ "$(ls -A "$tmp/k9")" = out ] || fail "after the kills: $(ls -A "$tmp/k9")"
echo "cli_integrity: kill -9 x20 ok (OUT briefly missing, old set beside it, in $missing)"

# 4. Two runs into one directory at once.
refused=0
for i in $(seq 1 10); do
  FAVOR_TEST_WRITE_PAUSE_MS=5 "$favor" run "$tmp/c.json" --seed 1 --out "$tmp/conc" --quiet 2>"$tmp/e1" & p1=$!
  FAVOR_TEST_WRITE_PAUSE_MS=5 "$favor" run "$tmp/c.json" --seed 2 --out "$tmp/conc" --quiet 2>"$tmp/e2" & p2=$!
  set +e; wait $p1; r1=$?; wait $p2; r2=$?; set -e
  for r in "$r1:$tmp/e1" "$r2:$tmp/e2"; do
    rc=${r%%:*} e=${r#*:}
    [ "$rc" = 0 ] || { [ "$rc" = 2 ] && grep -q "another favor process (pid [0-9]*) is writing" "$e"; } ||
      fail "concurrent, try $i: rc=$rc [$(cat "$e")]"
  done
  [ "$r1" = 0 ] || [ "$r2" = 0 ] || fail "concurrent, try $i: both refused"
  got=$(check_set "$tmp/conc" "concurrent, try $i")
  [ "$r1$r2" != 02 ] || [ "$got" = refA ] || fail "concurrent, try $i: seed 1 won but the set is $got"
  [ "$r1$r2" != 20 ] || [ "$got" = refB ] || fail "concurrent, try $i: seed 2 won but the set is $got"
  [ "$r1" = 0 ] && [ "$r2" = 0 ] || refused=$((refused + 1))
done
no_leftovers "$tmp" "concurrent"
echo "cli_integrity: concurrent runs x10 ok ($refused refused by the lock)"

# 5. The lock message; temporaries are not results.
FAVOR_TEST_WRITE_PAUSE_MS=2000 "$favor" run "$tmp/c.json" --out "$tmp/held" --quiet & holder=$!
sleep 0.5
set +e
err=$("$favor" run "$tmp/c.json" --out "$tmp/held" 2>&1); rc=$?
set -e
{ kill -9 $holder; wait $holder; } 2>/dev/null || true
[ $rc -eq 2 ] && [ "$err" = "favor: $tmp/held: another favor process (pid $holder) is writing this output directory; wait for it or choose another --out" ] ||
  fail "held lock: rc=$rc [$err]"
mkdir -p "$tmp/sh/.0.favor-tmp-1-0123456789abcdef"
cp "$tmp/refA/"* "$tmp/sh/.0.favor-tmp-1-0123456789abcdef/"
set +e
err=$("$favor" merge "$tmp/m" "$tmp/sh/.0.favor-tmp-1-0123456789abcdef" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "a temporary of an unfinished favor run" <<<"$err" || fail "temporary merged: rc=$rc [$err]"
echo "cli_integrity: ok"
