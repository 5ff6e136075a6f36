#!/usr/bin/env bash
# Requests that cannot fit, special files, flag misuse and numbers that used to be silently
# wrong, tried as a hostile user would. A failing case: its exit code, exactly one line on
# stderr naming the field, and no output written.
set -uo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $*" >&2; failures=$((failures + 1)); }
good='{"name": "g", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive", "projection": "iid"}], "m": 8, "trials": 1}'
cfg() { printf '%s' "$2" > "$tmp/$1.json"; echo "$tmp/$1.json"; }

# The CPU time (user + sys, ms) this shell's finished children have used so far (bash's
# `times`): a refusal "before any work" is judged by the CPU the command used, which a loaded
# machine does not inflate as it inflates wall time.
children_cpu_ms() {   # sets CHILDREN_MS (no subshell: `times` must see this shell's children)
  local u c
  times > "$tmp/times"   # in this shell (a $(...) or <(...) would run it in a subshell)
  { read -r _ _; read -r u c; } < "$tmp/times"
  CHILDREN_MS=$(awk -v u="$u" -v c="$c" 'function ms(x, a) { split(x, a, /[ms]/); return a[1] * 60000 + a[2] * 1000 }
                     BEGIN { printf "%d", ms(u) + ms(c) }')
}
# expect RC NAME EXPECTED_SUBSTRING favor-args...: exit code RC within 10 s, exactly one stderr
# line containing EXPECTED, and (unless RC is 0 or 3) nothing at $tmp/out. CPU_MS: the CPU
# time the command used.
expect() {
  local want=$1 name=$2 expect=$3; shift 3
  local err rc start
  children_cpu_ms; start=$CHILDREN_MS
  err=$(timeout 10 "$favor" "$@" 2>&1 >/dev/null); rc=$?
  children_cpu_ms; CPU_MS=$(( CHILDREN_MS - start ))
  local lines; lines=$(printf '%s' "$err" | grep -c '^' || true)
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$expect" <<<"$err"; then
    fail "$name: rc=$rc (want $want) lines=$lines stderr=[$err] expected [$expect]"
  fi
  if [ "$want" -ne 0 ] && [ "$want" -ne 3 ] && [ -e "$tmp/out" ]; then fail "$name: output written"; rm -rf "$tmp/out"; fi
}
expect_error() { expect 2 "$@"; }

# --- memory: refused at once, naming the field and the estimate ------------------------------
# The budget given (--max-memory 16G), not read from the machine: a machine with that much
# memory free would run these rather than refuse them.
big_L=$(cfg bigL "${good/\"L\": 64, \"d\": 8/\"L\": 4194304, \"d\": 512}")
expect_error L22-d512-validate "inputs.L: needs an estimated" validate "$big_L" --max-memory 16G
expect_error L22-d512-run "inputs.L: needs an estimated" run "$big_L" --out "$tmp/out" --max-memory 16G
[ "$CPU_MS" -lt 1000 ] || fail "L22-d512: refused after $CPU_MS ms of CPU"
# m = 32768 at L = 65536: with overflow_fraction favor_attention makes both (L, F) feature
# matrices (32 GiB); without it the fused forward's key partials at L = 262144 (36 GiB).
big_m=$(cfg bigm "${good/\"trials\": 1/\"trials\": 1, \"metrics\": [\"output_mse\", \"overflow_fraction\"]}")
expect_error m32768-L65536-overflow "m: needs an estimated" run "$big_m" --L 65536 --m 32768 --out "$tmp/out" --max-memory 16G
[ "$CPU_MS" -lt 1000 ] || fail "m32768-L65536-overflow: refused after $CPU_MS ms of CPU"
expect_error m32768-L262144-fused "m: needs an estimated" run "$(cfg bigmf "$good")" --L 262144 --m 32768 --out "$tmp/out" --max-memory 16G
[ "$CPU_MS" -lt 1000 ] || fail "m32768-L262144-fused: refused after $CPU_MS ms of CPU"
expect_error 100GB "inputs.L: needs an estimated" run "$(cfg b100 "${good/\"L\": 64, \"d\": 8/\"L\": 2097152, \"d\": 2048}")" --out "$tmp/out" --max-memory 16G
expect_error max-memory "more than the 20 MiB available (--max-memory)" run "$(cfg mm "$good")" --L 16384 --m 256 --max-memory 20M --out "$tmp/out"
expect_error max-memory-bad "run: --max-memory: unknown unit 'X'" run "$(cfg mm2 "$good")" --max-memory 8X --out "$tmp/out"
grep -q "^estimate: peak memory .* on [0-9]* thread" <<<"$("$favor" validate "$(cfg v "$good")")" || fail "validate prints no estimate"
expect_error apply-m-huge "apply: --m: must be an integer between 1 and 65536, got 100000000" apply --q x --k x --v x --features positive --m 100000000 --out "$tmp/out"
expect_error gen-L-neg "gen: --L: '-1' is not an integer" gen --L -1 --d 4 --out "$tmp/out"
expect_error apply-m-neg "apply: --m: '-1' is not an integer" apply --q x --k x --v x --features positive --m -1 --out "$tmp/out"
expect_error projection-m-neg "projection: --m: '-1' is not an integer" projection --projection iid --m -1 --d 4 --seed 0 --out "$tmp/out"
expect_error gen-big "gen: --L: needs an estimated" gen --L 4194304 --d 4096 --out "$tmp/out"
expect_error projection-big "projection: --m: needs an estimated" projection --projection iid --m 65536 --d 4096 --seed 0 --max-memory 1G --out "$tmp/out"

# --- threads: clamped with a warning, never an abort or a hang ---------------------------------
expect 0 threads-40000 "warning: --threads 40000 is more than" run "$(cfg t "$good")" --set inputs.L=4 --trials 3000 --threads 40000 --quiet --out "$tmp/t40k"
[ -s "$tmp/t40k/errors.csv" ] || fail "threads-40000: no output"
# (Not under AddressSanitizer: its shadow memory needs terabytes of address space. ldd's
# output is read whole: with pipefail, `ldd | grep -q` fails when grep's early exit makes
# ldd die of SIGPIPE, and the cases then ran under ASan.)
if [[ $(ldd "$favor" 2>/dev/null) == *libasan* ]]; then
  echo "cli_limits: ulimit cases skipped (AddressSanitizer build)"
else
  for i in 1 2 3; do
    err=$( (ulimit -v 1000000; timeout 20 "$favor" run "$tmp/t.json" --set trials=1000 --threads 40 --quiet --out "$tmp/tv$i") 2>&1 >/dev/null); rc=$?
    [ "$rc" -eq 0 ] && grep -q "does not fit the address-space limit" <<<"$err" || fail "ulimit -v 1G --threads 40 (try $i): rc=$rc [$err]"
  done
  err=$( (ulimit -d 1000000; timeout 20 "$favor" run "$tmp/t.json" --set trials=1000 --threads 40 --quiet --out "$tmp/td") 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 0 ] && grep -q "does not fit the data limit" <<<"$err" || fail "ulimit -d 1G --threads 40: rc=$rc [$err]"
  # An allocation that fails although the estimate fitted (the budget forced up): exit 1, one line.
  err=$( (ulimit -d 300000; timeout 20 "$favor" gen --L 4194304 --d 16 --max-memory 100G --out "$tmp/out") 2>&1 >/dev/null); rc=$?
  lines=$(printf '%s' "$err" | grep -c '^' || true)
  [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "^favor: out of memory (estimated peak" <<<"$err" && [ ! -e "$tmp/out" ] ||
    fail "allocation failure: rc=$rc lines=$lines [$err]"
fi

# --- special files: refused before they are opened ---------------------------------------------
mkfifo "$tmp/fifo.json" "$tmp/fifo.npy"
expect_error fifo-config "fifo.json: is a FIFO, not a regular file" validate "$tmp/fifo.json"
expect_error fifo-config-run "fifo.json: is a FIFO" run "$tmp/fifo.json" --out "$tmp/out"
expect_error dev-zero "/dev/zero: is a character device" validate /dev/zero
expect_error dir-config "is a directory" validate "$tmp"
head -c 2000000 /dev/zero | tr '\0' ' ' > "$tmp/huge.json"
expect_error huge-config "huge.json: config file is 2000000 bytes, more than the limit of 1048576" validate "$tmp/huge.json"
"$favor" gen --L 16 --d 4 --out "$tmp/in"
qkv=(--q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy")
expect_error fifo-npy "fifo.npy: is a FIFO" apply --q "$tmp/fifo.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy" --exact --out "$tmp/out"
npy_cfg() { cfg "$1" "{\"name\": \"n\", \"inputs\": {\"source\": \"npy\", \"q\": \"$2\", \"k\": \"$tmp/in/k.npy\", \"v\": \"$tmp/in/v.npy\"}, \"variants\": [{\"features\": \"positive\"}], \"m\": 8}"; }
expect_error fifo-npy-validate "fifo.npy: is a FIFO" validate "$(npy_cfg nf "$tmp/fifo.npy")"
expect_error missing-npy-validate "nope.npy: cannot open .npy file (No such file or directory)" validate "$(npy_cfg nm "$tmp/nope.npy")"
printf 'not an npy' > "$tmp/bad.npy"
expect_error bad-header-validate "bad.npy: not a .npy file" validate "$(npy_cfg nb "$tmp/bad.npy")"
"$favor" gen --L 20 --d 4 --out "$tmp/in20"
expect_error shape-validate2 "causal attention needs q and k of one length" validate "$(npy_cfg ns2 "$tmp/in20/q.npy")" --set causal=true
grep -q "^inputs: 1 head(s) of L = 16" <<<"$("$favor" validate "$(npy_cfg ok "$tmp/in/q.npy")")" || fail "validate npy inputs"

# --- flags: parsed whole, empty values refused, no wrap-around ---------------------------------
c=$(cfg f "{\"name\": \"f\", \"inputs\": {\"source\": \"random\", \"L\": 64, \"d\": 8}, \"variants\": [{\"features\": \"positive\"}], \"m\": 8, \"output_dir\": \"$tmp/out\"}")
expect_error trials-neg "run: --trials: '-5' is not an integer between 1 and 1000000" run "$c" --trials -5
expect_error m-empty "run: --m: empty value" run "$c" --m ''
expect_error m-item-empty "run: --m: empty value" run "$c" --m 16,,32
expect_error seed-empty "run: --seed: empty value" run "$c" --seed ''
expect_error dtype-empty "run: --dtype: must be float32, float64, float16 or bfloat16, got \"\"" run "$c" --dtype ''
expect_error shard-empty "--shard: expected K/N" run "$c" --shard ''
expect_error out-empty "run: --out: empty value" run "$c" --out ''
expect_error shard-neg "--shard: expected K/N with 0 <= K < N (e.g. 0/4), got '0/-1'" run "$c" --shard 0/-1
expect_error threads-neg "run: --threads: '-2' is not an integer" run "$c" --threads -2
expect_error set-trailing-dot "--set m.: empty path component" run "$c" --set m.=4
expect_error set-empty-value "--set m: empty value" run "$c" --set m=
expect_error projection-seed-neg "projection: --seed: '-1' is not an integer between 0 and 18446744073709551615" projection --projection iid --m 4 --d 4 --seed -1 --out "$tmp/out"
expect_error projection-simplex-d1 "projection: --d: 'simplex' needs d >= 2" projection --projection simplex --m 4 --d 1 --seed 0 --out "$tmp/out"
expect_error gen-scale-inf "gen: --scale: 'inf' is not a finite number" gen --L 4 --d 4 --scale inf --out "$tmp/out"
expect_error apply-seed-neg "apply: --seed: '-1' is not an integer" apply "${qkv[@]}" --features positive --m 4 --seed -1 --out "$tmp/out"
expect_error apply-m-exact "apply: --m: applies to --features only" apply "${qkv[@]}" --exact --m 4 --out "$tmp/out"
expect_error apply-out-empty "apply: --out: empty value" apply "${qkv[@]}" --exact --out ''
expect_error compare-alpha-empty "compare: --alpha: empty value" compare "$tmp" --alpha ''
expect_error duplicate-key "dup.json: m: duplicate key" validate "$(cfg dup "${good/\"m\": 8/\"m\": 8, \"m\": 16}")"
expect_error duplicate-key-nested "dup2.json: variants[0].features: duplicate key" validate "$(cfg dup2 "${good/\"features\": \"positive\"/\"features\": \"positive\", \"features\": \"trig\"}")"
printf '%s\0{"m": 32}' "$good" > "$tmp/nul.json"
expect_error nul-byte "nul.json: byte ${#good} is NUL" validate "$tmp/nul.json"
expect_error newline-in-string 'unknown feature map '"'"'a\nb'"'" validate "$(cfg nl "${good/\"features\": \"positive\"/\"features\": \"a\\nb\"}")"
expect_error escape-in-string 'unknown feature map '"'"'a\x1b[31mb'"'" validate "$(cfg esc "${good/\"features\": \"positive\"/\"features\": \"a\\u001b[31mb\"}")"
expect_error no-command "favor: missing command (one of run, validate" 
expect_error misspelt-command "favor: unknown command 'valdate', did you mean 'validate'?" valdate "$c"
expect_error unknown-command "favor: unknown command 'xyzzy'; commands: run, validate" xyzzy
out=$("$favor" --version) && grep -q "^favor [0-9.]* (git [0-9a-f]\{7,\}.*, [A-Za-z]*, " <<<"$out" || fail "--version: [$out]"

# --- late failures found early -----------------------------------------------------------------
slow=$(cfg slow "${good/\"L\": 64/\"L\": 16384}")
expect_error out-proc "/proc/favor_out: cannot create" run "$slow" --m 256 --trials 50 --out /proc/favor_out
[ "$CPU_MS" -lt 1000 ] || fail "out-proc: failed after $CPU_MS ms of CPU"
expect_error out-proc-apply "cannot write" apply "${qkv[@]}" --exact --out /proc/favor_out.npy
expect_error out-proc-gen "cannot create output directory" gen --L 4 --d 4 --out /proc/favor_out
expect_error simplex-d1 "variants[0].projection: 'simplex' needs d >= 2" validate "$(cfg s1 "${good/\"projection\": \"iid\"/\"projection\": \"simplex\"}")" --set inputs.d=1
expect_error givens-d1 "variants[0].projection: 'givens' needs d >= 2" validate "$(cfg g1 "${good/\"projection\": \"iid\"/\"projection\": \"givens\"}")" --set inputs.d=1

# --- numbers: non-finite outputs of apply are exit 3 with one line, after writing ------------
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((32, 8)) for _ in range(3))
np.save(f"{t}/big_q.npy", q * 1e20); np.save(f"{t}/big_k.npy", k * 1e20)
np.save(f"{t}/huge_q.npy", q * 1e200); np.save(f"{t}/huge_k.npy", k * 1e200)
np.save(f"{t}/v.npy", v)
z = q.copy(); z[3] = 0.0            # row 3: relu(Wx) = 0 for every w
np.save(f"{t}/zero_q.npy", z); np.save(f"{t}/k.npy", k)
# d = 64, one key 6x the typical norm at position 0 (causal row 0's answer is v_0).
q, k, v = (rng.standard_normal((300, 64)) for _ in range(3))
k[0] *= 6.0
for n, a in (("oq", q), ("ok", k), ("ov", v)): np.save(f"{t}/{n}.npy", a)
PY
expect 3 f32-exact-large "apply: 256 of 256 output entries are not finite (first: head 0, row 0); likely cause: the scores q.k / sqrt(d) can overflow float32" apply --q "$tmp/big_q.npy" --k "$tmp/big_k.npy" --v "$tmp/v.npy" --exact --dtype float32 --out "$tmp/o1.npy"
[ -s "$tmp/o1.npy" ] || fail "f32-exact-large: output not written"
expect 3 inputs-1e200 "likely cause: |q|^2 / sqrt(d) or |k|^2 / sqrt(d) overflows float64" apply --q "$tmp/huge_q.npy" --k "$tmp/huge_k.npy" --v "$tmp/v.npy" --features positive --m 16 --out "$tmp/o2.npy"
expect 3 inputs-1e200-f32 "do not fit float32 (use --dtype float64)" apply --q "$tmp/huge_q.npy" --k "$tmp/huge_k.npy" --v "$tmp/v.npy" --exact --dtype float32 --out "$tmp/o3.npy"
expect 3 relu-zero-row "(first: head 0, row 3); likely cause: the row's relu features are all 0" apply --q "$tmp/zero_q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --features relu --m 16 --out "$tmp/o4.npy"
expect 3 epsilon-huge "likely cause: --epsilon 1e+308 makes the features' sums overflow" apply --q "$tmp/zero_q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --features positive --m 16 --epsilon 1e308 --out "$tmp/o5.npy"
expect_error epsilon-inf "apply: --epsilon: must be a finite number, got \"inf\"" apply "${qkv[@]}" --features positive --m 8 --epsilon inf --out "$tmp/out"
expect_error A-neg-inf "apply: --A: must be a finite number, got \"-inf\"" apply "${qkv[@]}" --features oprf --m 8 --A=-inf --out "$tmp/out"
expect_error epsilon-after-bad "apply: --epsilon-after: must be \"max_exponent\"" apply "${qkv[@]}" --features positive --m 8 --epsilon-after max --out "$tmp/out"
"$favor" apply "${qkv[@]}" --features positive --m 8 --epsilon 1e-4 --epsilon-after max_wx --out "$tmp/wx.npy" || fail "--epsilon-after max_wx"
# float32 against float64 with the same W on the outlier key: causal and not, three maps.
for f in positive hyperbolic oprf; do
  for c in "" --causal; do
    for t in float32 float64; do
      "$favor" apply --q "$tmp/oq.npy" --k "$tmp/ok.npy" --v "$tmp/ov.npy" --features $f --m 64 $c --dtype $t --out "$tmp/o_$t.npy" || fail "outlier $f $c $t"
    done
    "$py" - "$tmp" "$c" <<'PY' || fail "outlier: float32 and float64 differ ($f $c)"
import sys, numpy as np
t, causal = sys.argv[1], sys.argv[2] == "--causal"
a, b, v = np.load(f"{t}/o_float32.npy").astype(np.float64), np.load(f"{t}/o_float64.npy"), np.load(f"{t}/ov.npy")
assert np.isfinite(a).all() and np.isfinite(b).all()
rel = np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)
assert rel.max() < 1e-4, rel.max()
if causal: assert np.allclose(a[0], v[0], rtol=1e-5, atol=1e-6), (a[0], v[0])
PY
  done
done
# float32 trig at scale 10: the negative fraction float64 reports.
tc=$(cfg trig "{\"name\": \"t\", \"inputs\": {\"source\": \"random\", \"L\": 512, \"d\": 16, \"scale\": 10}, \"variants\": [{\"features\": \"trig\", \"projection\": \"orthogonal\"}], \"m\": 64, \"metrics\": [\"negative_fraction\"]}")
for t in float32 float64; do "$favor" run "$tc" --dtype $t --quiet --out "$tmp/trig_$t" || fail "trig $t"; done
"$py" - "$tmp" <<'PY' || fail "trig scale 10: float32 negative_fraction differs from float64"
import sys, csv
t = sys.argv[1]
a, b = (float(list(csv.DictReader(open(f"{t}/trig_{x}/errors.csv")))[0]["negative_fraction"]) for x in ("float32", "float64"))
assert b > 0.4 and abs(a - b) < 0.01, (a, b)
PY

[ "$failures" -eq 0 ] || { echo "cli_limits: $failures failures" >&2; exit 1; }
echo "cli_limits: ok"
