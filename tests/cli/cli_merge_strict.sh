#!/usr/bin/env bash
# favor merge refuses, with exit 2, one line naming the directory and the difference, and no
# output: an incomplete shard set (unless --allow-partial, which marks run.json partial),
# shards of other configs (causal, epsilon under one name, trials), duplicates, damaged
# cells and keys, a run.json without variants, and files that are not regular files (an
# errors.csv symlink to /dev/zero, a FIFO).
set -euo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "s", "seed": 2, "inputs": {"source": "random", "L": [16, 24], "d": 4, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}],
 "m": [4, 8], "trials": 2, "metrics": ["output_mse", "attention_tv"]}
JSON
for k in 0 1 2 3; do "$favor" run "$tmp/c.json" --shard $k/4 --out "$tmp/s$k" --quiet; done
"$favor" run "$tmp/c.json" --out "$tmp/full" --quiet
"$favor" merge "$tmp/ok" "$tmp"/s{0,1,2,3} --quiet
cmp "$tmp/full/errors.csv" "$tmp/ok/errors.csv" && cmp "$tmp/full/summary.csv" "$tmp/ok/summary.csv" || fail "merge differs"

n=0
refused() {   # WHAT PATTERN DIR...: merge must exit 2 with one line matching PATTERN
  local what=$1 pattern=$2 err rc; shift 2
  n=$((n + 1))
  set +e
  err=$(timeout 20 "$favor" merge "$tmp/out$n" "$@" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc [$err]"
  [ "$(wc -l <<<"$err")" = 1 ] || fail "$what: not one line [$err]"
  grep -q -- "$pattern" <<<"$err" || fail "$what: [$err] does not say '$pattern'"
  [ ! -e "$tmp/out$n" ] || fail "$what: output written"
}
variant() {   # NAME SHARD K CHANGE...: shard K of the config with --set changes
  local name=$1 k=$2; shift 2
  "$favor" run "$tmp/c.json" --shard $k/4 --out "$tmp/$name" --quiet "$@"
}

refused "2 of 4 shards" "incomplete shard set: shard(s) 1, 3 of 4 missing for the config of $tmp/s0" "$tmp/s0" "$tmp/s2"
"$favor" merge "$tmp/partial" "$tmp/s0" "$tmp/s2" --allow-partial --quiet 2>/dev/null
grep -q '"partial": true' "$tmp/partial/run.json" || fail "--allow-partial: run.json not marked partial"
variant causal 1 --set causal=true
refused "causal with non-causal" "causal/run.json: config differs from $tmp/s0's in causal: true vs false" \
  "$tmp/s0" "$tmp/causal" "$tmp/s2" "$tmp/s3"
variant eps 1 --set variants.0.epsilon=1e-6
refused "epsilon under one name" "variant \"positive-orthogonal\" differs from $tmp/s0's in epsilon: 1e-06 vs 0.0" \
  "$tmp/s0" "$tmp/eps" "$tmp/s2" "$tmp/s3"
variant trials 1 --trials 3
refused "different trials" "in trials: 3 vs 2" "$tmp/s0" "$tmp/trials" "$tmp/s2" "$tmp/s3"
cp -r "$tmp/s1" "$tmp/dup1"
refused "the same shard twice" "is shard 1/4 again (also $tmp/s1): duplicate input" "$tmp"/s{0,1,2,3} "$tmp/dup1"
refused "one directory twice" "is given twice" "$tmp"/s{0,1,2,3} "$tmp/s1/"
# Damaged copies of shard 1.
damage() {   # NAME SED-EXPRESSION FILE
  rm -rf "$tmp/$1"; cp -r "$tmp/s1" "$tmp/$1"; sed -i "$2" "$tmp/$1/$3"
}
damage nan '2s/^\([^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,\)[^,]*/\1abc/' errors.csv
refused "a non-numeric metric cell" "/nan/errors.csv: line 2: output_mse: 'abc' is not a number" \
  "$tmp/s0" "$tmp/nan" "$tmp/s2" "$tmp/s3"
damage key '2s/,16,4,/,6x4,4,/' errors.csv
refused "the key L=6x4" "line 2: L: '6x4' is not a count" "$tmp/s0" "$tmp/key" "$tmp/s2" "$tmp/s3"
damage drop '$d' errors.csv
refused "a dropped row" "drop/errors.csv: incomplete" "$tmp/s0" "$tmp/drop" "$tmp/s2" "$tmp/s3"
rm -rf "$tmp/novariants"; cp -r "$tmp/s1" "$tmp/novariants"
/usr/bin/python3 - "$tmp/novariants/run.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
del j["config"]["variants"]
json.dump(j, open(sys.argv[1], "w"), indent=2)
PY
refused "run.json without variants" "novariants/run.json: variants: missing" "$tmp/s0" "$tmp/novariants" "$tmp/s2" "$tmp/s3"
rm -rf "$tmp/zero"; cp -r "$tmp/s1" "$tmp/zero"; ln -sf /dev/zero "$tmp/zero/errors.csv"
refused "errors.csv -> /dev/zero" "zero/errors.csv: not a regular file" "$tmp/s0" "$tmp/zero" "$tmp/s2" "$tmp/s3"
rm -rf "$tmp/fifo"; cp -r "$tmp/s1" "$tmp/fifo"; rm "$tmp/fifo/errors.csv"; mkfifo "$tmp/fifo/errors.csv"
refused "errors.csv a FIFO" "fifo/errors.csv: not a regular file" "$tmp/s0" "$tmp/fifo" "$tmp/s2" "$tmp/s3"
# A shard whose run was interrupted before its first result set.
mkdir "$tmp/unfinished"; echo '{"favor_journal":1}' > "$tmp/unfinished/journal.jsonl"
refused "an unfinished shard" "unfinished: an unfinished run (journal.jsonl, no run.json yet)" "$tmp/s0" "$tmp/unfinished"
# Sweep runs: different grids merge, the same cell from two runs does not.
"$favor" run "$tmp/c.json" --m 4 --out "$tmp/m4" --quiet
"$favor" run "$tmp/c.json" --m 8 --out "$tmp/m8" --quiet
"$favor" merge "$tmp/sweep" "$tmp/m8" "$tmp/m4" --quiet
cmp "$tmp/full/errors.csv" "$tmp/sweep/errors.csv" || fail "sweep merge differs"
refused "overlapping sweep runs" "is in both $tmp/m4 and $tmp/full (duplicate input?)" "$tmp/m4" "$tmp/full"
# A merged result merges again (its run.json records its cell count).
"$favor" merge "$tmp/again" "$tmp/sweep" --quiet
cmp "$tmp/full/errors.csv" "$tmp/again/errors.csv" || fail "re-merge differs"
echo "cli_merge_strict: ok ($n refusals)"
