#!/usr/bin/env bash
# Issue 36: a misspelt flag of any command gets a "did you mean" (as config keys and commands
# do): exit 2, one line naming the command and the flag; validate takes --m, --num-features
# and --L as run does (the same resolved config and the same errors, naming validate).
set -uo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect_lib.sh"   # fail, expect
cfg="$tmp/c.json"
printf '{"name": "f", "inputs": {"source": "random", "L": 16, "d": 4}, "variants": [{"features": "positive"}], "m": 4, "trials": 2}\n' > "$cfg"
expect 2 run "run: unknown flag '--tirals', did you mean '--trials'?" run "$cfg" --tirals 3 --out "$tmp/o"
expect 2 run-eq "run: unknown flag '--max-memroy', did you mean '--max-memory'?" run "$cfg" --max-memroy=1G --out "$tmp/o"
expect 2 validate "validate: unknown flag '--treads', did you mean '--threads'?" validate "$cfg" --treads 1
expect 2 gen "gen: unknown flag '--sed', did you mean '--seed'?" gen --L 4 --d 2 --sed 1 --out "$tmp/o"
expect 2 projection "projection: unknown flag '--projecton', did you mean '--projection'?" \
  projection --projecton iid --m 4 --d 2 --seed 0 --out "$tmp/w.npy"
expect 2 apply "apply: unknown flag '--layot', did you mean '--layout'?" apply --q a --k b --v c --layot BHLD --out "$tmp/x.npy"
expect 2 merge "merge: unknown flag '--allow-partal', did you mean '--allow-partial'?" merge "$tmp/o" "$tmp/a" --allow-partal
expect 2 compare "compare: unknown flag '--metrc', did you mean '--metric'?" compare "$tmp/o" --metrc output_mse
expect 2 far "run: unknown flag '--zzzzzzzz'; favor run --help lists its flags" run "$cfg" --zzzzzzzz
[ ! -e "$tmp/o" ] && [ ! -e "$tmp/w.npy" ] && [ ! -e "$tmp/x.npy" ] || fail "a refused command wrote"

# validate --m / --num-features / --L: the grid run would use.
out=$("$favor" validate "$cfg" --m 8,16 --L 32) || fail "validate --m --L"
python3 - "$out" <<'PY' || fail "validate --m 8,16 --L 32 did not resolve them: $out"
import json, sys
text = sys.argv[1]
cfg = json.loads(text[:text.index("\ninputs:") if "\ninputs:" in text else text.index("\nestimate:")])
assert cfg["m"] == [8, 16] and cfg["inputs"]["L"] == [32], cfg
PY
out=$("$favor" validate "$cfg" --num-features 16) || fail "validate --num-features"
grep -A1 '"num_features": \[' <<<"$out" | grep -q '^ *16$' && ! grep -q '"m":' <<<"$out" || fail "validate --num-features 16: $out"
grep -q ': ok, 1 cells x 2 trials' <<<"$out" || fail "validate --num-features cells: $out"
expect 2 validate-both "validate: --m and --num-features: give one" validate "$cfg" --m 4 --num-features 8
expect 2 validate-m0 "validate: --m: must be" validate "$cfg" --m 0
[ "$failures" = 0 ] || { echo "cli_flag_names: $failures failure(s)" >&2; exit 1; }
echo "cli_flag_names: ok"
