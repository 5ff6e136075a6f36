#!/usr/bin/env bash
# Resume identifies every input file by its content (docs/design.md section 6, "Resume"): a
# journal of a run is refused by --resume once any file the config reads has other bytes,
# also at the same size and mtime, and also for the files the identity once left out
# (inputs.grad, the kernel experiment's pairs.q / pairs.k). The same bytes resume, and the
# resumed tables equal an uninterrupted run's; the same files are refused inside OUT. Journals are made deterministically: the run
# is killed (-9) while it pauses in the result swap (FAVOR_TEST_WRITE_PAUSE_MS), when every
# item is journaled.
set -euo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A journal of CONFIG in OUT, every item in it, no result set.
journaled() {
  local config=$1 out=$2 pid
  FAVOR_TEST_WRITE_PAUSE_MS=60000 "$favor" run "$config" --out "$out" --threads 1 --quiet & pid=$!
  for _ in $(seq 1 3000); do
    compgen -G "$(dirname "$out")/.$(basename "$out").favor-tmp-*" >/dev/null && break
    sleep 0.02
  done
  kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  [ -f "$out/journal.jsonl" ] && [ ! -f "$out/errors.csv" ] && [ ! -f "$out/summary.csv" ] || fail "no journal in $out"
}
# Rewrites FILE with the bytes of OTHER (the same size) and gives it FILE's old mtime back.
swap_bytes() {
  [ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] || fail "swap_bytes: sizes differ"
  touch -r "$1" "$tmp/mtime"; cat "$2" > "$1"; touch -r "$tmp/mtime" "$1"
}
refused() {   # CONFIG OUT FIELD-TEXT: --resume exits 2 naming the input whose content changed
  set +e; err=$("$favor" run "$1" --out "$2" --resume --quiet 2>&1); rc=$?; set -e
  [ $rc = 2 ] && grep -qF "journal.jsonl: written by a different run (inputs.$3.sha256: " <<<"$err" ||
    fail "resume after $3 changed: rc=$rc [$err]"
}

"$favor" gen --L 48 --d 8 --seed 1 --out "$tmp/in" >/dev/null
"$favor" gen --L 48 --d 8 --seed 2 --out "$tmp/other" >/dev/null
cp "$tmp/other/q.npy" "$tmp/in/g.npy"          # the upstream gradient G: (L, d_v)
cp "$tmp/other/v.npy" "$tmp/in/g2.npy"         # another G of the same size
cat > "$tmp/in/a.json" <<'JSON'
{"name": "a", "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy", "grad": "g.npy"},
 "variants": [{"features": "positive"}, {"features": "trig"}], "m": [4, 8], "trials": 3,
 "metrics": ["output_mse", "grad_q_rel_error"]}
JSON
"$favor" run "$tmp/in/a.json" --out "$tmp/a_full" --quiet
journaled "$tmp/in/a.json" "$tmp/a"
cp "$tmp/in/g.npy" "$tmp/g.orig"; cp "$tmp/in/q.npy" "$tmp/q.orig"
swap_bytes "$tmp/in/g.npy" "$tmp/in/g2.npy"                # inputs.grad: not in the identity before
refused "$tmp/in/a.json" "$tmp/a" "$tmp/in/g.npy"
swap_bytes "$tmp/in/g.npy" "$tmp/g.orig"
swap_bytes "$tmp/in/q.npy" "$tmp/other/q.npy"              # q: same size and mtime, other bytes
refused "$tmp/in/a.json" "$tmp/a" "$tmp/in/q.npy"
swap_bytes "$tmp/in/q.npy" "$tmp/q.orig"
touch "$tmp/in/k.npy"                                      # a new mtime alone is the same input
"$favor" run "$tmp/in/a.json" --out "$tmp/a" --resume --quiet
for f in errors.csv summary.csv; do cmp "$tmp/a_full/$f" "$tmp/a/$f" || fail "$f differs after resume"; done

# The kernel experiment's pairs files.
cp "$tmp/in/q.npy" "$tmp/in/pq.npy"; cp "$tmp/in/k.npy" "$tmp/in/pk.npy"
cat > "$tmp/in/k.json" <<'JSON'
{"name": "kp", "experiment": "kernel", "d": 8, "m": [4, 8], "pairs": {"q": "pq.npy", "k": "pk.npy", "count": 3},
 "trials": 20, "variants": [{"features": "positive"}, {"features": "trig"}]}
JSON
"$favor" run "$tmp/in/k.json" --out "$tmp/k_full" --quiet
journaled "$tmp/in/k.json" "$tmp/k"
cp "$tmp/in/pk.npy" "$tmp/pk.orig"
swap_bytes "$tmp/in/pk.npy" "$tmp/other/k.npy"
refused "$tmp/in/k.json" "$tmp/k" "$tmp/in/pk.npy"
swap_bytes "$tmp/in/pk.npy" "$tmp/pk.orig"
"$favor" run "$tmp/in/k.json" --out "$tmp/k" --resume --quiet
cmp "$tmp/k_full/summary.csv" "$tmp/k/summary.csv" || fail "kernel: summary.csv differs after resume"
# The same list of files is refused inside OUT (the swap would delete it): inputs.grad too.
cp "$tmp/in/g.npy" "$tmp/a/g.npy"
set +e; err=$("$favor" run "$tmp/in/a.json" --set inputs.grad="$tmp/a/g.npy" --out "$tmp/a" --quiet 2>&1); rc=$?; set -e
[ $rc = 2 ] && grep -qF "a.json: inputs.grad: $tmp/a/g.npy is inside the output directory" <<<"$err" || fail "grad inside OUT: rc=$rc [$err]"
[ -f "$tmp/a/g.npy" ] || fail "grad inside OUT: deleted"
echo "cli_resume_inputs: ok"
