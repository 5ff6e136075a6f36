#!/usr/bin/env bash
# Device nodes of the test's own (mknod: root only; skipped with exit 77 otherwise) where
# favor writes: an output file (apply --out, projection --out), the journal OUT/journal.jsonl,
# the lock .OUT.favor-lock. Each is refused with one line, exit 2, and the node stays a node
# (before issue 26 the rename replaced it with a regular file, /dev/null included as root).
set -uo pipefail
favor=$1
[ "$(id -u)" = 0 ] || { echo "cli_devices: skipped (mknod needs root)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mknod "$tmp/probe" c 1 3 2>/dev/null || { echo "cli_devices: skipped (mknod refused here)"; exit 77; }
failures=0
fail() { echo "FAIL $*" >&2; failures=$((failures + 1)); }
expect2() {   # NAME EXPECTED favor-args...: exit 2 within 20 s, one stderr line containing EXPECTED
  local name=$1 expected=$2; shift 2
  local err rc
  err=$(timeout 20 "$favor" "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 2 ] || [ "$(printf '%s' "$err" | grep -c '^')" -ne 1 ] || ! grep -qF -- "$expected" <<<"$err"; then
    fail "$name: rc=$rc stderr=[$err] expected [$expected]"
  fi
}
printf '%s' '{"name": "d", "inputs": {"source": "random", "L": 16, "d": 4}, "variants": [{"features": "positive", "projection": "iid"}], "m": 4, "trials": 1}' > "$tmp/c.json"
"$favor" gen --L 8 --d 4 --out "$tmp/in" || fail "gen"
mknod "$tmp/null" c 1 3
expect2 apply-node "null: is a character device, not a regular file" \
  apply --q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy" --exact --out "$tmp/null"
expect2 projection-node "null: is a character device" projection --projection iid --m 4 --d 4 --seed 0 --out "$tmp/null"
mkdir "$tmp/rs"; echo '{}' > "$tmp/rs/run.json"; mknod "$tmp/rs/journal.jsonl" c 1 3
expect2 journal-node "journal.jsonl: is a character device" run "$tmp/c.json" --out "$tmp/rs" --quiet
expect2 journal-node-resume "journal.jsonl: is a character device" run "$tmp/c.json" --out "$tmp/rs" --quiet --resume
mknod "$tmp/.locked.favor-lock" c 1 3
expect2 lock-node ".locked.favor-lock: is a character device" run "$tmp/c.json" --out "$tmp/locked" --quiet
for node in "$tmp/null" "$tmp/rs/journal.jsonl" "$tmp/.locked.favor-lock"; do
  [ -c "$node" ] || fail "$node is no longer a character device"
done
[ -c /dev/null ] || fail "/dev/null is no longer a character device"
[ $failures -eq 0 ] || { echo "cli_devices: $failures failure(s)" >&2; exit 1; }
echo "cli_devices: ok"
