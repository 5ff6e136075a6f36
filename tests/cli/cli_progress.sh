#!/usr/bin/env bash
# Progress a log can show: with stderr not a terminal, one line every --progress-every
# seconds (cell trials done/total, percent, elapsed, time left), none with --quiet; on a
# terminal (through script(1)), a live bar redrawn with \r.
set -euo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "p", "seed": 1, "inputs": {"source": "random", "L": [256, 384], "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}, {"features": "hyperbolic"}],
 "m": [8, 32], "trials": 8, "metrics": ["output_mse", "attention_tv", "attention_kl"]}
JSON
# Trials such that a run lasts at least ~0.5 s here (a few progress lines), doubling from 8
# up to 32 (24 cells each): a Release build needs about 32, a sanitizer build fewer.
trials=8
while :; do
  rm -rf "$tmp/a"
  start=$(date +%s%N)
  "$favor" run "$tmp/c.json" --trials $trials --out "$tmp/a" --threads 1 --progress-every 0.1 >/dev/null 2>"$tmp/log"
  ms=$((($(date +%s%N) - start) / 1000000))
  [ $ms -lt 500 ] && [ $trials -lt 32 ] || break
  trials=$((trials * 2))
done
# The estimate line comes first (issue 36), then only progress lines.
head -1 "$tmp/log" | grep -q '^favor: estimate: peak memory .* thread(s); budget ' || fail "no estimate line first [$(head -1 "$tmp/log")]"
sed -i 1d "$tmp/log"
lines=$(wc -l < "$tmp/log")
[ "$lines" -ge 2 ] || fail "$lines progress lines in $ms ms [$(cat "$tmp/log")]"
[ "$lines" -le $((ms / 100 + 1)) ] || fail "$lines lines in $ms ms: more than one per 0.1 s"
bad=$(grep -cv '^\[favor\] [0-9]*/'$((24 * trials))' cell trials done ([0-9]*%), [0-9]*s elapsed, \(~[0-9hms]* left\|time left unknown\)$' "$tmp/log" || true)
[ "$bad" = 0 ] || fail "malformed progress lines [$(cat "$tmp/log")]"
! grep -q $'\r' "$tmp/log" || fail "carriage returns in a log"
"$favor" run "$tmp/c.json" --out "$tmp/b" --quiet --progress-every 0.2 2>"$tmp/quiet"
[ ! -s "$tmp/quiet" ] || fail "--quiet printed [$(cat "$tmp/quiet")]"
set +e
err=$("$favor" run "$tmp/c.json" --out "$tmp/c" --progress-every 0 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q -- "--progress-every: must be a number of seconds > 0" <<<"$err" || fail "--progress-every 0: rc=$rc [$err]"
if command -v script >/dev/null; then
  # The bar appears once a run takes over 1 s. 4x the trials calibrated above should take
  # ~2 s, but that calibration may have run under load: a run that ends within 1.5 s without
  # a bar is retried with twice the trials (at most twice); a longer one without a bar fails.
  tt=$((4 * trials))
  for attempt in 1 2 3; do
    rm -rf "$tmp/d"
    start=$(date +%s%N)
    script -qec "'$favor' run '$tmp/c.json' --trials $tt --out '$tmp/d' --threads 1 >/dev/null" /dev/null > "$tmp/tty" </dev/null
    tms=$((($(date +%s%N) - start) / 1000000))
    grep -q $'\r\\[favor\\] \\[[#.]*\\] [0-9]*/'$((24 * tt))' cell trials' "$tmp/tty" && break
    [ $tms -lt 1500 ] && [ $attempt -lt 3 ] || fail "no progress bar on a terminal in a run of $tms ms [$(head -c 300 "$tmp/tty")]"
    tt=$((tt * 2))
  done
fi
echo "cli_progress: ok ($lines lines in $ms ms)"
