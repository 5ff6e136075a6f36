#!/usr/bin/env bash
# Every bad input: exit 2, exactly one line on stderr naming the file/field/argument, and no
# output directory created or changed.
set -uo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
good='{"name": "g", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive", "projection": "iid"}], "m": 8, "trials": 1}'

# expect_error NAME EXPECTED_SUBSTRING favor-args...
expect_error() {
  local name=$1 expect=$2; shift 2
  local err rc
  err=$("$favor" "$@" 2>&1 >/dev/null); rc=$?
  local lines; lines=$(printf '%s' "$err" | grep -c '^' || true)
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$expect" <<<"$err"; then
    echo "FAIL $name: rc=$rc lines=$lines stderr=[$err] expected [$expect]" >&2; failures=$((failures + 1))
  fi
  if [ -e "$tmp/out" ]; then echo "FAIL $name: output directory created" >&2; failures=$((failures + 1)); rm -rf "$tmp/out"; fi
}
cfg() { printf '%s' "$2" > "$tmp/$1.json"; echo "$tmp/$1.json"; }

expect_error unknown-key "trails: unknown key, did you mean 'trials'?" run "$(cfg a '{"name": "g", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive"}], "m": 8, "trails": 1}')" --out "$tmp/out"
expect_error wrong-type "m: must be an integer, got a string" run "$(cfg b "${good/\"m\": 8/\"m\": \"8\"}")" --out "$tmp/out"
expect_error m-zero "m: must be between 1" run "$(cfg c "${good/\"m\": 8/\"m\": 0}")" --out "$tmp/out"
expect_error m-negative "m[1]: must be >= 1" run "$(cfg d "${good/\"m\": 8/\"m\": [8, -1]}")" --out "$tmp/out"
expect_error empty-variants "variants: must not be empty" run "$(cfg e '{"name": "g", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [], "m": 8}')" --out "$tmp/out"
expect_error unknown-map "variants[0].features: unknown feature map 'softmaxx'" run "$(cfg f "${good/positive/softmaxx}")" --out "$tmp/out"
expect_error broken-json "invalid JSON" run "$(cfg g '{"name": "g", "m": [8,')" --out "$tmp/out"
expect_error huge-number "invalid JSON" run "$(cfg g2 '{"name": "g", "m": 1.3E577777}')" --out "$tmp/out"
expect_error not-object "must be a JSON object" run "$(cfg h '[1, 2]')" --out "$tmp/out"
expect_error missing-file "nope.json: cannot open config file" run "$tmp/nope.json" --out "$tmp/out"
expect_error bad-set "--set noequals: expected PATH=VALUE" run "$(cfg i "$good")" --out "$tmp/out" --set noequals
expect_error bad-m-flag "run: --m: 'x' is not an integer between 1 and 65536" run "$(cfg j "$good")" --out "$tmp/out" --m 8,x
expect_error bad-shard "--shard: expected K/N" run "$(cfg k "$good")" --out "$tmp/out" --shard 4/4
expect_error bad-dtype "run: --dtype: must be float32, float64, float16 or bfloat16, got \"float8\"" run "$(cfg l "$good")" --out "$tmp/out" --dtype float8
expect_error bad-seed "run: --seed: '-3' is not an integer between 0 and" run "$(cfg n "$good")" --out "$tmp/out" --seed -3
expect_error bad-flag "favor:" run "$(cfg o "$good")" --out "$tmp/out" --bogus
expect_error no-subcommand "favor: missing command"
touch "$tmp/afile"
expect_error out-is-file "afile: --out is not a directory" run "$(cfg p "$good")" --out "$tmp/afile"
expect_error validate-bad "trails: unknown key" validate "$(cfg q '{"name": "g", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive"}], "m": 8, "trails": 1}')"

# gen, projection and apply flags (apply checks its flags before reading any tensor).
expect_error gen-zero "gen: --L: must be an integer between 1 and" gen --L 0 --d 4 --out "$tmp/out"
expect_error gen-dtype "gen: --dtype: must be float32, float64, float16 or bfloat16" gen --L 4 --d 4 --dtype half --out "$tmp/out"
expect_error proj-unknown "unknown projection 'hadamardd'" projection --projection hadamardd --m 4 --d 4 --seed 0 --out "$tmp/out"
"$favor" gen --L 16 --d 4 --out "$tmp/in"
qkv=(--q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy")
expect_error apply-none "apply: give --exact or --features" apply "${qkv[@]}" --out "$tmp/out"
expect_error apply-both "apply: give either --exact or --features" apply "${qkv[@]}" --exact --features positive --out "$tmp/out"
expect_error apply-m "apply: --m: missing" apply "${qkv[@]}" --features positive --out "$tmp/out"
expect_error apply-map "unknown feature map 'postive'" apply "${qkv[@]}" --features postive --m 8 --out "$tmp/out"
expect_error apply-eps "apply: --epsilon: must be >= 0" apply "${qkv[@]}" --features positive --m 8 --epsilon -1 --out "$tmp/out"
expect_error apply-A-map "apply: --A: applies only to features 'oprf'" apply "${qkv[@]}" --features positive --m 8 --A 0.1 --out "$tmp/out"
expect_error apply-A-big "apply: --A: must be < 1/8" apply "${qkv[@]}" --features oprf --m 8 --A 0.125 --out "$tmp/out"
expect_error apply-A-text "apply: --A: must be a number < 1/8 or \"optimal\", got \"0.1x\"" apply "${qkv[@]}" --features oprf --m 8 --A 0.1x --out "$tmp/out"
expect_error apply-dtype "apply: --dtype: must be float32, float64, float16 or bfloat16" apply "${qkv[@]}" --exact --dtype half --out "$tmp/out"
"$favor" apply "${qkv[@]}" --features oprf --m 8 --A -0.05 --out "$tmp/ok.npy" && [ -s "$tmp/ok.npy" ] ||
  { echo "FAIL: apply --features oprf --A -0.05" >&2; failures=$((failures + 1)); }
expect_error apply-param-form "apply: --param: expected KEY=VALUE (e.g. nu=2), got \"t\"" apply "${qkv[@]}" --features gerf --m 8 --param t --out "$tmp/out"
expect_error apply-param-t "apply: --param t: must be > 0, got -1" apply "${qkv[@]}" --features gerf --m 8 --param t=-1 --out "$tmp/out"
expect_error apply-param-map "apply: --param t: applies only to features 'gerf'" apply "${qkv[@]}" --features oprf --m 8 --param t=1 --out "$tmp/out"
expect_error apply-param-own-flag "apply: --param A: use --A" apply "${qkv[@]}" --features gerf --m 8 --A 0.1 --param A=0.05 --out "$tmp/out"
expect_error apply-param-twice "apply: --param t: given twice" apply "${qkv[@]}" --features gerf --m 8 --param t=1 --param t=2 --out "$tmp/out"
expect_error apply-param-features "apply: --param features: use --features" apply "${qkv[@]}" --features gerf --m 8 --param features=oprf --out "$tmp/out"
for args in "--features gerf --A -0.1 --param t=0.8" "--features gerf --param t=optimal --causal" \
            "--features sderf --dtype float32" "--features saderf --causal"; do
  # shellcheck disable=SC2086
  "$favor" apply "${qkv[@]}" --m 8 $args --out "$tmp/ok2.npy" && [ -s "$tmp/ok2.npy" ] ||
    { echo "FAIL: apply $args" >&2; failures=$((failures + 1)); }
  rm -f "$tmp/ok2.npy"
done

# Existing results stay intact when a later run fails.
"$favor" run "$(cfg r "$good")" --out "$tmp/keep" --quiet
before=$(cat "$tmp/keep/errors.csv")
"$favor" run "$(cfg s "${good/\"m\": 8/\"m\": 0}")" --out "$tmp/keep" --quiet 2>/dev/null
[ "$(cat "$tmp/keep/errors.csv")" = "$before" ] || { echo "FAIL: earlier results changed" >&2; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] || { echo "cli_errors: $failures failures" >&2; exit 1; }
echo "cli_errors: ok"
