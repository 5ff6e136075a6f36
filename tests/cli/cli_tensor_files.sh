#!/usr/bin/env bash
# Tensor files as researchers keep them (docs/design.md section 5): one set of tensors written by
# numpy as .npy, .npz (savez and savez_compressed) and .safetensors gives bitwise the same
# errors.csv; so do its float16 / bfloat16 copies and the float32 files of the same values, and
# a (B, L, H, d) file with "layout": "BLHD"; read without the layout it is refused (L < H).
# inputs.L takes the first L rows (equal to files cut by numpy; scripts/sweep_L.sh on tensor
# files equals one run over the list). Every malformed .npz / .safetensors of the corpora is
# exit 2, one line naming the file, no output. The paths rule: relative paths in the file from
# its folder, on the command line from the working directory; runs print the absolute directory.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
"$py" -c 'import numpy' 2>/dev/null || { echo "cli_tensor_files: no python3-numpy, skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" - "$tmp" <<'PY'
import json, struct, sys
import numpy as np
t = sys.argv[1]
rng = np.random.default_rng(3)
q, k = rng.standard_normal((2, 3, 40, 8)), rng.standard_normal((2, 3, 40, 8))
v = rng.standard_normal((2, 3, 40, 5))
def safetensors(path, arrays, dtype="F64"):
    hdr, data = {}, b""
    for name, raw, shape in arrays:
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
def bf16_bits(a):   # round to nearest even, as favor's bfloat16 rounding does
    u = np.asarray(a, "<f4").view("<u4").astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
for n, a in zip("qkv", (q, k, v)):
    np.save(f"{t}/{n}.npy", a)
    np.save(f"{t}/{n}_blhd.npy", np.ascontiguousarray(a.transpose(0, 2, 1, 3)))
    np.save(f"{t}/{n}_f16.npy", a.astype(np.float16))
    np.save(f"{t}/{n}_f16as32.npy", a.astype(np.float16).astype(np.float32))
    b = bf16_bits(a)
    np.save(f"{t}/{n}_bf16.npy", b.view("V2"))           # a 2-byte void: how ml_dtypes' bfloat16 is saved
    np.save(f"{t}/{n}_bf16as32.npy", (b.astype("<u4") << 16).view("<f4"))
    for L in (8, 16):
        np.save(f"{t}/{n}_{L}.npy", a[:, :, :L])
np.savez(f"{t}/qkv.npz", q=q, k=k, v=v)
np.savez_compressed(f"{t}/qkvc.npz", queries=q, k=k, v=v)
safetensors(f"{t}/qkv.safetensors", [(n, a.astype("<f8").tobytes(), a.shape) for n, a in zip("qkv", (q, k, v))])
safetensors(f"{t}/qkv_bf16.safetensors", [(n, bf16_bits(a).tobytes(), a.shape) for n, a in zip("qkv", (q, k, v))], "BF16")
PY

mkdir "$tmp/cfg"
cat > "$tmp/cfg/c.json" <<'JSON'
{"name": "tf", "seed": 4, "inputs": {"source": "npy", "q": "../q.npy", "k": "../k.npy", "v": "../v.npy"},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}],
 "m": 8, "trials": 2, "metrics": ["output_mse", "attention_tv"], "output_dir": "out"}
JSON
c=$tmp/cfg/c.json
# The paths rule: output_dir "out" in the file is beside it, whatever the working directory.
(cd / && "$favor" run "$c" > "$tmp/stdout")
[ -f "$tmp/cfg/out/errors.csv" ] || fail "output_dir not resolved against the config's folder"
grep -q "^wrote $tmp/cfg/out/ in " "$tmp/stdout" || fail "run does not print the absolute directory: $(tail -1 "$tmp/stdout")"
(cd "$tmp" && grep -qx "output directory: $tmp/cfg/out/" <<<"$("$favor" validate cfg/c.json 2>/dev/null)") || fail "validate: output directory"
# --out and --set paths from the working directory.
(cd "$tmp" && "$favor" run cfg/c.json --out rel --set inputs.q=q.npy --quiet)
cmp "$tmp/cfg/out/errors.csv" "$tmp/rel/errors.csv" || fail "--out / --set relative to the working directory"
ref=$tmp/cfg/out/errors.csv

same() {   # NAME, then run flags: errors.csv must equal the .npy run's byte for byte
  local name=$1; shift
  "$favor" run "$c" --out "$tmp/o_$name" --quiet "$@" || fail "$name: run failed"
  cmp "$ref" "$tmp/o_$name/errors.csv" || fail "$name: errors.csv differs from the .npy run's"
}
for f in qkv.npz qkv.safetensors; do same "$f" --set inputs.q="$tmp/$f" --set inputs.k="$tmp/$f" --set inputs.v="$tmp/$f:v"; done
same npz_compressed --set inputs.q="$tmp/qkvc.npz:queries" --set inputs.k="$tmp/qkvc.npz" --set inputs.v="$tmp/qkvc.npz"
same blhd --set inputs.q="$tmp/q_blhd.npy" --set inputs.k="$tmp/k_blhd.npy" --set inputs.v="$tmp/v_blhd.npy" \
  --set inputs.layout=BLHD
# Causal too: the containers against the .npy files.
"$favor" run "$c" --set causal=true --out "$tmp/causal" --quiet
"$favor" run "$c" --set causal=true --set inputs.q="$tmp/qkvc.npz:queries" --set inputs.k="$tmp/qkv.npz" \
  --set inputs.v="$tmp/qkv.safetensors" --out "$tmp/causal_mixed" --quiet
cmp "$tmp/causal/errors.csv" "$tmp/causal_mixed/errors.csv" || fail "causal: containers differ from .npy"
! cmp -s "$ref" "$tmp/causal/errors.csv" || fail "causal rows equal the non-causal ones"

# Half-precision files: the same values as float32 files give the same numbers.
for h in f16 bf16; do
  "$favor" run "$c" --set inputs.q="$tmp/q_${h}as32.npy" --set inputs.k="$tmp/k_${h}as32.npy" \
    --set inputs.v="$tmp/v_${h}as32.npy" --out "$tmp/h32_$h" --quiet
  "$favor" run "$c" --set inputs.q="$tmp/q_$h.npy" --set inputs.k="$tmp/k_$h.npy" --set inputs.v="$tmp/v_$h.npy" \
    --out "$tmp/h_$h" --quiet
  cmp "$tmp/h32_$h/errors.csv" "$tmp/h_$h/errors.csv" || fail "$h .npy differs from float32 files of its values"
done
"$favor" run "$c" --set inputs.q="$tmp/qkv_bf16.safetensors" --set inputs.k="$tmp/qkv_bf16.safetensors" \
  --set inputs.v="$tmp/qkv_bf16.safetensors" --out "$tmp/st_bf16" --quiet
cmp "$tmp/h_bf16/errors.csv" "$tmp/st_bf16/errors.csv" || fail "BF16 safetensors differs from the bfloat16 .npy"

# A (B, L, H, d) file read without a layout: refused, one line naming the file and the key.
set +e
err=$("$favor" run "$c" --set inputs.q="$tmp/q_blhd.npy" --set inputs.k="$tmp/k_blhd.npy" \
  --set inputs.v="$tmp/v_blhd.npy" --out "$tmp/bad" 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] && [ "$(grep -c '' <<<"$err")" -eq 1 ] && grep -q "q_blhd.npy: shape (2, 40, 3, 8) read as (B, H, L, d) gives 40 heads of L = 3 rows" <<<"$err" &&
  grep -q 'set inputs.layout to "BLHD"' <<<"$err" && [ ! -e "$tmp/bad" ] || fail "L < H not refused: rc=$rc [$err]"

# inputs.L: the first L rows, as files cut by numpy; sweep_L.sh on tensor files = one run over the list.
"$favor" run "$c" --L 8,16 --out "$tmp/L" --quiet
for L in 8 16; do
  "$favor" run "$c" --set inputs.q="$tmp/q_$L.npy" --set inputs.k="$tmp/k_$L.npy" --set inputs.v="$tmp/v_$L.npy" \
    --out "$tmp/cut$L" --quiet
  grep "^[^,]*,[^,]*,[^,]*,$L," "$tmp/L/errors.csv" > "$tmp/L$L.rows"
  tail -n +2 "$tmp/cut$L/errors.csv" | cmp - "$tmp/L$L.rows" || fail "inputs.L=$L differs from the first $L rows cut by numpy"
done
FAVOR=$favor bash "$src/scripts/sweep_L.sh" "$c" "$tmp/sweep" "16 8" > /dev/null
cmp "$tmp/L/errors.csv" "$tmp/sweep/errors.csv" || fail "sweep_L.sh on tensor files differs from one run over the list"
set +e
err=$("$favor" run "$c" --L 41 --out "$tmp/bad" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [ "$err" = "favor: $c: inputs.L: 41 is more than the 40 rows (L) of $tmp/q.npy (a tensor file gives its first L rows)" ] &&
  [ ! -e "$tmp/bad" ] || fail "L beyond the file: rc=$rc [$err]"

# apply reads the containers and layouts too: the same output as from the .npy files.
"$favor" apply --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --features positive --m 8 --out "$tmp/a.npy"
"$favor" apply --q "$tmp/qkvc.npz:queries" --k "$tmp/qkv.safetensors" --v "$tmp/v_blhd.npy" --layout BLHD \
  --features positive --m 8 --out "$tmp/b.npy" 2>/dev/null && fail "apply: one layout for files of two layouts accepted"
"$favor" apply --q "$tmp/q_blhd.npy" --k "$tmp/k_blhd.npy" --v "$tmp/v_blhd.npy" --layout BLHD --features positive \
  --m 8 --out "$tmp/b.npy"
"$favor" apply --q "$tmp/qkvc.npz:queries" --k "$tmp/qkv.safetensors" --v "$tmp/qkv.npz" --features positive --m 8 \
  --out "$tmp/c.npy"
# --layout BLHD writes the output in that layout too (issue 36): a's values, transposed.
"$py" -c 'import sys, numpy as np; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(not np.array_equal(a.transpose(0, 2, 1, 3), b))' \
  "$tmp/a.npy" "$tmp/b.npy" && cmp "$tmp/a.npy" "$tmp/c.npy" || fail "apply: containers or layout change the output"

# Malformed containers: exit 2, one line naming the file, no output directory. Their q is
# (2, 3): read as (d, L) (no L < d warning) with k and v of that shape, so the data is read too.
"$py" -c "import numpy as np; [np.save('$tmp/' + n + '23.npy', np.ones((2, 3))) for n in 'kv']"
n=0
for bad in "$src"/tests/data/npz_bad/*.npz "$src"/tests/data/safetensors_bad/*.safetensors; do
  n=$((n + 1))
  set +e
  err=$("$favor" run "$c" --set inputs.q="\"$bad\"" --set inputs.k="$tmp/k23.npy" --set inputs.v="$tmp/v23.npy" \
    --set inputs.layout=DL --out "$tmp/badout" --quiet 2>&1 >/dev/null); rc=$?   # --quiet: no estimate line
  set -e
  [ $rc -eq 2 ] && [ "$(grep -c '' <<<"$err")" -eq 1 ] && grep -qF "$(basename "$bad")" <<<"$err" || fail "$bad: rc=$rc [$err]"
  [ ! -e "$tmp/badout" ] || fail "$bad: output directory created"
done
[ $n -ge 50 ] || fail "only $n malformed containers"
echo "cli_tensor_files: ok (4 formats, 2 half types, layout, inputs.L, $n malformed containers)"
