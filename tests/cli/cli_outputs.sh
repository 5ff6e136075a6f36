#!/usr/bin/env bash
# Issue 36, the command line's outputs: no path may hold a NUL (a config's name or output_dir
# "a\u0000b" would write to "a"); `apply`'s outputs (--out and, with --grad, OUT_dq.npy,
# OUT_dk.npy, OUT_dv.npy) are different files from its inputs and from each other (symbolic
# and hard links included); G is checked before anything is written; non-finite gradients
# exit 3 like a non-finite output. A refusal: exit 2, one line, nothing written, inputs intact.
set -uo pipefail
favor=$1
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect_lib.sh"   # fail, expect

# --- NUL in a path-like config string -------------------------------------------------------
mkdir "$tmp/c" && cd "$tmp/c" || exit 1
base='"inputs": {"source": "random", "L": 16, "d": 4}, "variants": [{"features": "positive"}], "m": 4, "trials": 2'
printf '{"name": "a\\u0000b", %s}\n' "$base" > name.json
printf '{"output_dir": "out/x\\u0000y", %s}\n' "$base" > dir.json
for cmd in validate run; do
  expect 2 "$cmd-name-nul" 'name.json: name: holds a NUL character (\u0000) at offset 1' $cmd name.json
  expect 2 "$cmd-dir-nul" 'dir.json: output_dir: holds a NUL character (\u0000)' $cmd dir.json
done
printf '{%s}\n' "$base" > ok.json
expect 2 set-output-dir-nul 'output_dir: holds a NUL character' run ok.json --set 'output_dir="o\u0000p"'
expect 2 set-name-nul 'name: holds a NUL character' run ok.json --set 'name="n\u0000"'
[ -z "$(ls -A "$tmp/c" | grep -v '\.json$')" ] || fail "NUL configs wrote: $(ls -A "$tmp/c")"
cd "$tmp" || exit 1

# --- apply: outputs distinct from inputs and from each other --------------------------------
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t, rng = sys.argv[1], np.random.default_rng(3)
for n, shape in [("q", (2, 12, 4)), ("k", (2, 9, 4)), ("v", (2, 9, 3)), ("g", (2, 12, 3))]:
    np.save(f"{t}/{n}.npy", 0.5 * rng.standard_normal(shape))
g = rng.standard_normal((2, 12, 3)); g[1, 7, 2] = np.nan; np.save(f"{t}/gnan.npy", g)
np.save(f"{t}/ghuge.npy", np.full((2, 12, 3), 3e38))   # finite in float32; the gradients overflow it
q = rng.standard_normal((1, 2, 12, 4)); q[0, 1, 5, 3] = np.inf; np.save(f"{t}/qnan.npy", q)
np.save(f"{t}/qnan_blhd.npy", q.transpose(0, 2, 1, 3).copy())   # the same entry, stored (B, L, H, d)
for n, dv in [("k4", 4), ("v4", 3)]:
    x = rng.standard_normal((1, 2, 12, dv))
    np.save(f"{t}/{n}.npy", x)
    np.save(f"{t}/{n}_blhd.npy", x.transpose(0, 2, 1, 3).copy())
PY
args=(apply --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --features positive --m 8)
sums() { md5sum "$tmp"/*.npy | md5sum; }
before=$(sums)
mkdir "$tmp/o"
ln "$tmp/g.npy" "$tmp/o/hard.npy"
ln -s "$tmp/k.npy" "$tmp/o/soft.npy"
cp "$tmp/q.npy" "$tmp/o/x_dq.npy"
expect 2 out-is-grad "apply: --out $tmp/g.npy is the same file as --grad $tmp/g.npy; every output must differ" \
  "${args[@]}" --grad "$tmp/g.npy" --out "$tmp/g.npy"
expect 2 out-is-grad-dotted "is the same file as --grad" "${args[@]}" --grad "$tmp/g.npy" --out "$tmp/o/../g.npy"
expect 2 out-is-q "apply: --out $tmp/q.npy is the same file as --q $tmp/q.npy" "${args[@]}" --out "$tmp/q.npy"
expect 2 hard-link "apply: --out $tmp/o/hard.npy is the same file as --grad $tmp/g.npy" \
  "${args[@]}" --grad "$tmp/g.npy" --out "$tmp/o/hard.npy"
expect 2 symlink-out "$tmp/o/soft.npy: is a symbolic link (to $tmp/k.npy); favor writes its outputs in place, never through a link" \
  "${args[@]}" --out "$tmp/o/soft.npy"
expect 2 symlink-in "apply: --out $tmp/k.npy is the same file as --k $tmp/o/soft.npy" \
  apply --q "$tmp/q.npy" --k "$tmp/o/soft.npy" --v "$tmp/v.npy" --exact --out "$tmp/k.npy"
expect 2 dq-is-input "apply: the dq output $tmp/o/x_dq.npy is the same file as --q $tmp/o/x_dq.npy" \
  apply --q "$tmp/o/x_dq.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --exact --grad "$tmp/g.npy" --out "$tmp/o/x.npy"
expect 2 g-not-finite "apply: --grad: $tmp/gnan.npy entry (h, l, d) = (1, 7, 2) is not finite" \
  "${args[@]}" --grad "$tmp/gnan.npy" --out "$tmp/o/y.npy"
expect 2 q-not-finite "$tmp/qnan.npy: entry (b, h, l, d) = (0, 1, 5, 3) is Inf (inputs must be finite)" \
  apply --q "$tmp/qnan.npy" --k "$tmp/k4.npy" --v "$tmp/v4.npy" --exact --out "$tmp/o/y.npy"
expect 2 q-not-finite-layout "$tmp/qnan_blhd.npy: entry (b, h, l, d) = (0, 1, 5, 3) is Inf" \
  apply --q "$tmp/qnan_blhd.npy" --k "$tmp/k4_blhd.npy" --v "$tmp/v4_blhd.npy" --layout BLHD --exact --out "$tmp/o/y.npy"
# Dangling links: refused before any work, by every command that writes (nothing created).
ln -s "$tmp/nowhere/x.npy" "$tmp/o/dangling.npy"
ln -s "$tmp/nowhere/d" "$tmp/o/dangling_dir"
expect 2 dangling-apply "$tmp/o/dangling.npy: is a symbolic link (to $tmp/nowhere/x.npy)" "${args[@]}" --out "$tmp/o/dangling.npy"
ln -s "$tmp/nowhere/w_dq.npy" "$tmp/o/w_dq.npy"
expect 2 dangling-grad "$tmp/o/w_dq.npy: is a symbolic link" "${args[@]}" --grad "$tmp/g.npy" --out "$tmp/o/w.npy"
expect 2 dangling-projection "dangling.npy: is a symbolic link" projection --projection iid --m 4 --d 4 --seed 0 --out "$tmp/o/dangling.npy"
expect 2 dangling-gen "dangling_dir: is a symbolic link" gen --L 4 --d 2 --out "$tmp/o/dangling_dir"
printf '{"inputs": {"source": "random", "L": 16, "d": 4}, "variants": [{"features": "positive"}], "m": 4, "trials": 2}\n' > "$tmp/r.json"
expect 2 dangling-run "dangling_dir: is a symbolic link" run "$tmp/r.json" --out "$tmp/o/dangling_dir/"
"$favor" run "$tmp/r.json" --out "$tmp/r1" --quiet || fail "run r1"
expect 2 dangling-merge "dangling_dir: is a symbolic link" merge "$tmp/o/dangling_dir" "$tmp/r1"
[ ! -e "$tmp/nowhere" ] || fail "a dangling link's target was created"
rm "$tmp/o/dangling.npy" "$tmp/o/dangling_dir" "$tmp/o/w_dq.npy"
[ "$(sums)" = "$before" ] || fail "an input .npy changed"
[ "$(ls "$tmp/o" | sort | tr '\n' ' ')" = "hard.npy soft.npy x_dq.npy " ] || fail "refusals wrote: $(ls "$tmp/o")"

# Gradients named after --out, every one written; non-finite gradients: exit 3 naming the file.
"$favor" "${args[@]}" --grad "$tmp/g.npy" --out "$tmp/o/r.npy" || fail "apply --grad"
for n in r r_dq r_dk r_dv; do [ -f "$tmp/o/$n.npy" ] || fail "no $n.npy"; done
expect 3 grad-nonfinite "entries are not finite (first: head 0, row 0)" \
  apply --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --exact --dtype float32 --grad "$tmp/ghuge.npy" --out "$tmp/o/h.npy"
err=$("$favor" apply --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --exact --dtype float32 --grad "$tmp/ghuge.npy" \
      --out "$tmp/o/h.npy" 2>&1 >/dev/null)
grep -q "dq entries are not finite.*(written to $tmp/o/h_dq.npy)" <<<"$err" || fail "non-finite dq not named: $err"
grep -q "output entries are not finite" <<<"$err" && fail "the output is finite, yet reported: $err"

# --layout covers G and the outputs: BLHD inputs and G give BLHD out and gradients, equal to
# the BHLD run's transposed (the same numbers, bit for bit).
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t, rng = sys.argv[1], np.random.default_rng(5)
for n, dv in [("q", 4), ("k", 4), ("v", 3), ("g", 3)]:
    x = 0.5 * rng.standard_normal((2, 3, 10, dv))   # (B, H, L, d)
    np.save(f"{t}/l_{n}.npy", x)
    np.save(f"{t}/l_{n}_blhd.npy", x.transpose(0, 2, 1, 3).copy())
PY
mkdir "$tmp/l"
"$favor" apply --q "$tmp/l_q.npy" --k "$tmp/l_k.npy" --v "$tmp/l_v.npy" --features positive --m 8 \
  --grad "$tmp/l_g.npy" --out "$tmp/l/bhld.npy" || fail "apply BHLD"
"$favor" apply --q "$tmp/l_q_blhd.npy" --k "$tmp/l_k_blhd.npy" --v "$tmp/l_v_blhd.npy" --layout BLHD \
  --features positive --m 8 --grad "$tmp/l_g_blhd.npy" --out "$tmp/l/blhd.npy" || fail "apply --layout BLHD --grad"
"$py" - "$tmp/l" <<'PY' || fail "--layout BLHD outputs are not the BHLD ones transposed"
import sys, numpy as np
d = sys.argv[1]
for suffix in ("", "_dq", "_dk", "_dv"):
    a, b = np.load(f"{d}/bhld{suffix}.npy"), np.load(f"{d}/blhd{suffix}.npy")
    assert b.shape == (a.shape[0], a.shape[2], a.shape[1], a.shape[3]), (suffix, a.shape, b.shape)
    assert np.array_equal(a.transpose(0, 2, 1, 3), b), suffix
PY
expect 2 grad-layout-shape "apply: --grad: $tmp/l_g.npy has shape (2, 3, 10, 3), expected (2, 10, 3, 3) (the output's shape in the layout (B, L, H, d))" \
  apply --q "$tmp/l_q_blhd.npy" --k "$tmp/l_k_blhd.npy" --v "$tmp/l_v_blhd.npy" --layout BLHD --exact \
  --grad "$tmp/l_g.npy" --out "$tmp/l/bad.npy"
[ ! -e "$tmp/l/bad.npy" ] || fail "a refused --grad wrote"

[ "$failures" = 0 ] || { echo "cli_outputs: $failures failure(s)" >&2; exit 1; }
echo "cli_outputs: ok"
