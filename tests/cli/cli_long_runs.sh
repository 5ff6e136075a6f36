#!/usr/bin/env bash
# Issue 36, long runs: `favor run` prints validate's estimate on stderr as it starts (not with
# --quiet) and refuses a run estimated over an hour without --yes (one line, exit 2, nothing
# written, not even the output's parent or lock); the first SIGINT is answered by one line
# saying what the run waits for, and a second SIGINT stops it at once (killed by the signal:
# no stop report). Deterministic: each step waits for the output of the one before, never for
# a fixed time.
set -uo pipefail
favor=$1
tmp=$(mktemp -d)
pid=
cleanup() { [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "$0")/expect_lib.sh"   # fail
# wait_for FILE PATTERN: until FILE has a line matching PATTERN (grep -E), at most 120 s
# (the bound only ends a broken run; a working one answers in well under a second).
wait_for() {
  local i
  for ((i = 0; i < 2400; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { grep -qE -- "$2" "$1" 2>/dev/null; return; }
    sleep 0.05
  done
  return 1
}
# One cell whose exact reference alone takes minutes on one thread (L = 65536, d = 64), so the
# run is still busy with it when the signals come; with many trials its estimate passes an hour.
cat > "$tmp/long.json" <<'JSON'
{"name": "long", "inputs": {"source": "random", "L": 65536, "d": 64},
 "variants": [{"features": "positive", "projection": "iid"}], "m": 16, "trials": 100000, "metrics": ["output_mse"]}
JSON
common=(--threads 1 --max-memory 64G)

# --- over an hour: refused without --yes --------------------------------------------------
err=$("$favor" run "$tmp/long.json" --out "$tmp/sub/out" "${common[@]}" 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] || fail "over an hour: exit $rc, expected 2 [$err]"
[ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "over an hour: not one line [$err]"
grep -qE '^favor: run: --yes: the run is estimated at about [0-9.e+]+ h on 1 thread\(s\), above the limit of 3600 s .*add --yes to start it' <<<"$err" \
  || fail "over an hour: message [$err]"
[ ! -e "$tmp/sub" ] || fail "over an hour: wrote $(find "$tmp/sub")"
v=$("$favor" validate "$tmp/long.json" "${common[@]}") || fail "validate long.json"
grep -qE '^estimate: peak memory .*about [0-9.e+]+ h on 1 thread' <<<"$v" || fail "validate's estimate [$v]"
# Under an hour: no --yes needed; the estimate line first on stderr, none with --quiet.
"$favor" run "$tmp/long.json" --set inputs.L=64 --set trials=2 --out "$tmp/short" "${common[@]}" \
  --progress-every 1e10 2>"$tmp/short.err" >/dev/null || fail "short run [$(cat "$tmp/short.err")]"
line=$(grep -F "$(sed -n 's/^estimate: /favor: estimate: /p' <<<"$("$favor" validate "$tmp/long.json" --set inputs.L=64 --set trials=2 "${common[@]}")")" "$tmp/short.err")
[ -n "$line" ] && [ "$(head -1 "$tmp/short.err")" = "$line" ] || fail "run's estimate line is not validate's, first [$(cat "$tmp/short.err")]"
"$favor" run "$tmp/long.json" --set inputs.L=64 --set trials=2 --out "$tmp/short" "${common[@]}" --quiet 2>"$tmp/quiet.err" >/dev/null
[ ! -s "$tmp/quiet.err" ] || fail "--quiet printed [$(cat "$tmp/quiet.err")]"

# --- SIGINT: the first says what it waits for, the second stops at once -------------------
"$favor" run "$tmp/long.json" --yes --out "$tmp/sig" "${common[@]}" --progress-every 0.05 >/dev/null 2>"$tmp/sig.err" &
pid=$!
wait_for "$tmp/sig.err" '^\[favor\] 0/100000 cell trials done' || fail "no progress line [$(cat "$tmp/sig.err")]"
kill -INT "$pid"
wait_for "$tmp/sig.err" '^\[favor\] SIGINT: finishing the 1 cell trial\(s\) in flight \(time unknown: none has finished yet\), then keeping the 0 done in the journal; Ctrl-C again stops now$' \
  || fail "no answer to the first SIGINT [$(cat "$tmp/sig.err")]"
kill -INT "$pid"
wait "$pid"; rc=$?; pid=
[ "$rc" = 130 ] || fail "second SIGINT: exit $rc, expected 130 (killed by SIGINT) [$(cat "$tmp/sig.err")]"
! grep -q 'stopped by SIGINT after' "$tmp/sig.err" || fail "the second SIGINT waited for the run [$(cat "$tmp/sig.err")]"
[ ! -e "$tmp/sig/errors.csv" ] || fail "a stopped run wrote errors.csv"

[ "$failures" = 0 ] || { echo "cli_long_runs: $failures failure(s)" >&2; exit 1; }
echo "cli_long_runs: ok"
