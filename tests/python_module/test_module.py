"""import favor against the CLI: the same numbers bit for bit, the same one-line messages,
and a Ctrl-C during favor.run that leaves nothing half-written (as tests/cli/cli_resume.sh and
tests/cli/cli_integrity.sh check for the CLI)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import favor

FAVOR = os.environ["FAVOR"]
SRC = Path(__file__).resolve().parents[2]

# Three estimators (and exact), each with its own map family: positive (FAVOR+), trig, oprf.
ESTIMATORS = [dict(features="positive", m=16), dict(features="trig", m=16, projection="iid"),
              dict(features="oprf", m=12, projection="orthogonal")]


def cli(*args, cwd=None):
    return subprocess.run([FAVOR, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def flags(kw):
    out = []
    for k, v in kw.items():
        out += [f"--{k.replace('_', '-')}", v]
    return out


@pytest.fixture(scope="module")
def qkv(tmp_path_factory):
    """q, k, v of shape (2, 48, 8) / (2, 48, 8) / (2, 48, 5) saved as files named q, k, v (so
    the CLI's messages name them as the module names its arguments)."""
    d = tmp_path_factory.mktemp("qkv")
    rng = np.random.default_rng(5)
    t = {n: rng.normal(size=(2, 48, 5 if n == "v" else 8)) * 0.7 for n in "qkv"}
    for n, a in t.items():
        with open(d / n, "wb") as f:
            np.save(f, a)
    return d, t


@pytest.mark.parametrize("est", ESTIMATORS + [dict(exact=True)], ids=["positive", "trig", "oprf", "exact"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_attention_bitwise_cli(qkv, est, causal, dtype):
    d, t = qkv
    kw = {k: v for k, v in est.items() if k != "exact"}
    args = ["apply", "--q", "q", "--k", "k", "--v", "v", "--seed", 3, "--dtype", dtype, *flags(kw),
            "--out", f"o_{dtype}_{causal}.npy"] + (["--exact"] if "exact" in est else []) + (["--causal"] if causal else [])
    r = cli(*args, cwd=d)
    assert r.returncode == 0, r.stderr
    want = np.load(d / f"o_{dtype}_{causal}.npy")
    got = favor.attention(t["q"], t["k"], t["v"], seed=3, dtype=dtype, causal=causal, **est)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    # Fortran order and a strided slice of a (B, H, L, d) array read in place: the same bits.
    big = np.zeros((1, 2, 48, 16))
    big[0, :, :, ::2] = t["q"]
    f = favor.attention(np.asfortranarray(big[0, :, :, ::2]), np.asfortranarray(t["k"]), t["v"], seed=3,
                        dtype=dtype, causal=causal, **est)
    assert f.tobytes() == want.tobytes()


def test_float32_inputs_and_heads(qkv):
    """float32 inputs give what the CLI gives for the same float32 file; one head alone equals
    that head of the batch."""
    d, t = qkv
    q32 = {n: a.astype(np.float32) for n, a in t.items()}
    for n, a in q32.items():
        np.save(d / f"{n}32.npy", a)
    r = cli("apply", "--q", "q32.npy", "--k", "k32.npy", "--v", "v32.npy", "--features", "positive", "--m", 16,
            "--out", "o32.npy", cwd=d)
    assert r.returncode == 0, r.stderr
    got = favor.attention(q32["q"], q32["k"], q32["v"], features="positive", m=16)
    assert got.tobytes() == np.load(d / "o32.npy").tobytes()
    one = favor.attention(q32["q"][1], q32["k"][1], q32["v"][1], features="positive", m=16)
    assert one.tobytes() == got[1].tobytes()
    # dtype float32 on C-contiguous float32 arrays: read in place (no copy), the CLI's bits on the
    # same files, and the bits of Fortran-order copies (converted); exact and estimated, causal too.
    for est in (dict(features="positive", m=16), dict(exact=True)):
        for causal in (False, True):
            args = ["apply", "--q", "q32.npy", "--k", "k32.npy", "--v", "v32.npy", "--dtype", "float32", "--out",
                    "o32f.npy", *flags({k: v for k, v in est.items() if k != "exact"})]
            r = cli(*args, *(["--exact"] if "exact" in est else []), *(["--causal"] if causal else []), cwd=d)
            assert r.returncode == 0, r.stderr
            got = favor.attention(q32["q"], q32["k"], q32["v"], dtype="float32", causal=causal, **est)
            assert got.tobytes() == np.load(d / "o32f.npy").tobytes()
            fortran = favor.attention(*(np.asfortranarray(q32[n]) for n in "qkv"), dtype="float32", causal=causal, **est)
            assert fortran.tobytes() == got.tobytes()
    # A NaN in the second head of an array read in place: the message of the converting reader.
    k_nan = q32["k"].copy()
    k_nan[1, 7, 2] = np.nan
    with pytest.raises(favor.Error) as in_place:
        favor.attention(q32["q"], k_nan, q32["v"], dtype="float32", features="positive", m=16)
    with pytest.raises(favor.Error) as copied:
        favor.attention(q32["q"], np.asfortranarray(k_nan), q32["v"], dtype="float32", features="positive", m=16)
    assert str(in_place.value) == str(copied.value) == "k: entry (h, l, d) = (1, 7, 2) is NaN (inputs must be finite)"
    half = favor.attention(t["q"].astype(np.float16), t["k"].astype(np.float16), t["v"].astype(np.float16),
                           features="positive", m=16)
    same = favor.attention(t["q"].astype(np.float16).astype(np.float32), t["k"].astype(np.float16).astype(np.float32),
                           t["v"].astype(np.float16).astype(np.float32), features="positive", m=16)
    assert half.tobytes() == same.tobytes()


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_bitwise_cli(qkv, causal):
    d, t = qkv
    g = np.random.default_rng(9).normal(size=(2, 48, 5))
    np.save(d / "g.npy", g)
    os.makedirs(d / f"grad{causal}", exist_ok=True)
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--features", "positive", "--m", 16, "--grad", "g.npy",
            "--out", f"grad{causal}/o.npy", *(["--causal"] if causal else []), cwd=d)
    assert r.returncode == 0, r.stderr
    dq, dk, dv = favor.attention_grad(t["q"], t["k"], t["v"], g, features="positive", m=16, causal=causal)
    for name, got in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert got.tobytes() == np.load(d / f"grad{causal}" / f"o_{name}.npy").tobytes(), name


@pytest.mark.parametrize("hybrid", [dict(features="positive", m=12, window=4, sinks=1), dict(features="none", window=6)],
                         ids=["positive+w4+s1", "none+w6"])
def test_hybrid_bitwise_cli(qkv, hybrid):
    """A hybrid (docs/design.md 2.8) through the module: its output and its gradients are the CLI's."""
    d, t = qkv
    g = np.random.default_rng(11).normal(size=(2, 48, 5))
    np.save(d / "gh.npy", g)
    name = hybrid["features"]
    os.makedirs(d / f"hyb_{name}", exist_ok=True)
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--causal", *flags(hybrid), "--grad", "gh.npy",
            "--out", f"hyb_{name}/o.npy", cwd=d)
    assert r.returncode == 0, r.stderr
    out = favor.attention(t["q"], t["k"], t["v"], causal=True, **hybrid)
    assert out.tobytes() == np.load(d / f"hyb_{name}" / "o.npy").tobytes()
    dq, dk, dv = favor.attention_grad(t["q"], t["k"], t["v"], g, causal=True, **hybrid)
    for n, got in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert got.tobytes() == np.load(d / f"hyb_{name}" / f"o_{n}.npy").tobytes(), n


def test_projection_and_features(tmp_path):
    r = cli("projection", "--projection", "orthogonal", "--m", 12, "--d", 8, "--seed", 4, "--trial", 1,
            "--out", tmp_path / "W.npy")
    assert r.returncode == 0, r.stderr
    W = favor.projection("orthogonal", m=12, d=8, seed=4, trial=1)
    assert W.tobytes() == np.load(tmp_path / "W.npy").tobytes()
    # phi(q) phi(k)^T row-normalised times v is the attention output (positive: no epsilon).
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(32, 8)) * 0.5, rng.normal(size=(32, 8)) * 0.5, rng.normal(size=(32, 3))
    pq = favor.features(q, "positive", m=64, seed=1, other=k)
    pk = favor.features(k, "positive", m=64, seed=1, side="key", other=q)
    A = pq @ pk.T
    out = favor.attention(q, k, v, features="positive", m=64, seed=1)
    # Two float64 evaluations of one formula in different orders: relative error ~1e-15 per
    # entry; 1e-10 leaves room for the sums over 32 keys and is far below any estimator error.
    np.testing.assert_allclose(A @ v / A.sum(1, keepdims=True), out, rtol=1e-10, atol=1e-12)


# (module call, CLI arguments): each bad input refused with the same one line.
BAD = [
    (dict(features="positve", m=8), ["--features", "positve", "--m", 8]),
    (dict(features="positive", m=0), ["--features", "positive", "--m", 0]),
    (dict(features="positive"), ["--features", "positive"]),
    (dict(features="positive", m=8, exact=True), ["--features", "positive", "--m", 8, "--exact"]),
    (dict(features="nystrom", m=8, causal=True), ["--features", "nystrom", "--m", 8, "--causal"]),
    (dict(features="positive", m=8, dtype="float8"), ["--features", "positive", "--m", 8, "--dtype", "float8"]),
    (dict(features="positive", m=8, seed=-1), ["--features", "positive", "--m", 8, "--seed", -1]),
    (dict(features="positive", m=8, epsilon="inf"), ["--features", "positive", "--m", 8, "--epsilon", "inf"]),
    (dict(features="positive", m=8, nu=2), ["--features", "positive", "--m", 8, "--param", "nu=2"]),
    (dict(features="dpfp", nu=0), ["--features", "dpfp", "--param", "nu=0"]),
    (dict(features="elu", m=8), ["--features", "elu", "--m", 8]),
    (dict(features="positive", m=8, projection="hadamard2"), ["--features", "positive", "--m", 8, "--projection", "hadamard2"]),
    (dict(features="positive", m=8, max_memory="1K"), ["--features", "positive", "--m", 8, "--max-memory", "1K"]),
]


@pytest.mark.parametrize("kw,args", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_messages(qkv, kw, args):
    d, t = qkv
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", *args, "--out", "bad.npy", cwd=d)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    with pytest.raises(favor.Error) as e:
        favor.attention(t["q"], t["k"], t["v"], **kw)
    assert isinstance(e.value, ValueError)
    assert "favor: " + str(e.value) + "\n" == r.stderr
    assert not (d / "bad.npy").exists()


def test_bad_tensors_messages(qkv, tmp_path):
    """Shapes and values: the CLI names the files q, k, v as the module names its arguments."""
    _, t = qkv
    cases = {"width": (t["q"], t["k"][..., :6], t["v"]), "length": (t["q"], t["k"], t["v"][:, :40]),
             "rank": (t["q"][0, 0], t["k"], t["v"]), "nan": (np.where(np.arange(8) == 3, np.nan, t["q"]), t["k"], t["v"])}
    for name, (q, k, v) in cases.items():
        for n, a in zip("qkv", (q, k, v)):
            with open(tmp_path / n, "wb") as f:
                np.save(f, a)
        r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--features", "positive", "--m", 8, "--out", "o.npy",
                cwd=tmp_path)
        assert r.returncode == 2, (name, r.stderr)
        with pytest.raises(favor.Error) as e:
            favor.attention(q, k, v, features="positive", m=8)
        assert "favor: " + str(e.value) + "\n" == r.stderr, name
    with pytest.raises(favor.Error, match="dtype <i8 is not supported"):
        favor.attention(np.ones((4, 2), dtype=np.int64), t["k"][0], t["v"][0], exact=True)


CONFIG = {"name": "py", "seed": 1, "inputs": {"source": "random", "L": [16, 24], "d": 4, "scale": [0.5, 1.0]},
          "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}],
          "m": [4, 8], "trials": 3, "metrics": ["output_mse", "attention_tv"]}


def test_run_validate_compare_equal_cli(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(CONFIG))
    r = cli("run", cfg, "--out", tmp_path / "cli", "--trials", 4, "--quiet")
    assert r.returncode == 0, r.stderr
    t = favor.run(cfg, out=tmp_path / "py", trials=4)
    for name in ("errors", "summary"):
        assert (tmp_path / "py" / f"{name}.csv").read_bytes() == (tmp_path / "cli" / f"{name}.csv").read_bytes()
        import pandas as pd
        pd.testing.assert_frame_equal(t[name], pd.read_csv(tmp_path / "cli" / f"{name}.csv"))
    assert t.info["config"]["trials"] == 4 and t.out == str(tmp_path / "py")
    # A dict config runs the same cells.
    t2 = favor.run(dict(CONFIG, trials=4), out=tmp_path / "py2")
    assert (tmp_path / "py2" / "errors.csv").read_bytes() == (tmp_path / "cli" / "errors.csv").read_bytes()
    # The memory budget given (not read from /proc/meminfo): two processes' texts compare equal
    # whatever the machine's free memory did between them.
    with pytest.warns(UserWarning, match="no favor compare verdict is reachable"):   # the CLI's warning
        v = favor.validate(cfg, threads=1, max_memory="1G")
    r = cli("validate", cfg, "--threads", 1, "--max-memory", "1G")
    assert "favor: warning: validate: with 3 trials no favor compare verdict" in r.stderr
    assert "budget 1 GiB (--max-memory)" in v["text"] and "MemAvailable" not in v["text"]
    assert v["text"] == r.stdout and v["cells"] == 16 and v["peak_bytes"] > 0
    before = sorted(p.name for p in (tmp_path / "py").iterdir())
    with pytest.warns(UserWarning, match="underpowered"):
        c = favor.compare(tmp_path / "py")
    assert sorted(p.name for p in (tmp_path / "py").iterdir()) == before   # nothing written unless asked
    r = cli("compare", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    assert c["metrics"] == ["output_mse"] and len(c["comparisons"]) > 0 and c["description"] in r.stdout
    import pandas as pd
    for name in ("comparisons", "ranking"):   # the tables returned are the CLI's files
        pd.testing.assert_frame_equal(c[name], pd.read_csv(tmp_path / "cli" / f"{name}_output_mse.csv"))
    with pytest.warns(UserWarning, match="underpowered"):
        favor.compare(tmp_path / "py", metric="all", write=True)
    cli("compare", tmp_path / "cli", "--metric", "all")
    for name in ("comparisons", "ranking"):
        for metric in ("output_mse", "attention_tv"):
            f = f"{name}_{metric}.csv"
            assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes()
    for kw, args in ((dict(m=[4, 0]), ["--m", "4,0"]), (dict(trials=0), ["--trials", 0]),
                     (dict(set=["inputs.d=-1"]), ["--set", "inputs.d=-1"])):
        r = cli("run", cfg, "--out", tmp_path / "bad", *args)
        with pytest.raises(favor.Error) as e:
            favor.run(cfg, out=tmp_path / "bad", **kw)
        assert "favor: " + str(e.value) + "\n" == r.stderr
        assert not (tmp_path / "bad").exists()
    with pytest.raises(favor.Error) as e:
        favor.compare(tmp_path / "py", alpha=2)
    assert "favor: " + str(e.value) + "\n" == cli("compare", tmp_path / "py", "--alpha", 2).stderr


SIGINT_RUN = """
import sys, favor
cfg = {"name": "long", "seed": 7, "inputs": {"source": "random", "L": [256, 384], "d": 8, "scale": [0.5, 1.0]},
       "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig"}],
       "m": [8, 32], "trials": int(sys.argv[2]), "metrics": ["output_mse", "attention_tv"]}
print("started", flush=True)
try:
    favor.run(cfg, out=sys.argv[1], threads=1)
except KeyboardInterrupt as e:
    print("interrupted:", e, flush=True)
    sys.exit(130)
"""


def test_sigint_during_run_leaves_nothing_half_written(tmp_path):
    """Ctrl-C in the middle of favor.run: KeyboardInterrupt naming what was kept, the earlier
    result set in OUT byte for byte, only the journal beside it, no temporaries."""
    out = tmp_path / "out"
    favor.run(dict(CONFIG), out=out)   # the earlier result set
    script = tmp_path / "long.py"
    script.write_text(SIGINT_RUN)
    env = dict(os.environ)
    # The signal is sent once the run has journalled a finished cell trial (its stop handlers are
    # installed with the journal), not after a fixed sleep: a loaded machine may not have reached
    # the run by then, a fast one may have finished it. A run that ends before (it replaced the
    # result set whole, which is then the earlier one) is retried with more trials.
    journal = out / "journal.jsonl"
    for trials in (64, 256, 1024, 4096):
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        p = subprocess.Popen([sys.executable, str(script), str(out), str(trials)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        assert p.stdout.readline() == "started\n"
        while p.poll() is None and not (journal.exists() and journal.stat().st_size > 0):
            time.sleep(0.002)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=120)
        if p.returncode != 0:
            break
    assert p.returncode == 130, (stdout, stderr)
    assert f"stopped by SIGINT after" in stdout and f"kept in {out}/journal.jsonl" in stdout, stdout
    assert "continue with favor.run(..., resume=True)" in stdout
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(after) == set(before) | {"journal.jsonl"}
    assert all(after[n] == b for n, b in before.items())
    assert [p.name for p in tmp_path.iterdir() if "favor-" in p.name] == []


def test_example_runs(tmp_path):
    """examples/from_python.py, the README's example: runs and draws its figure."""
    r = subprocess.run([sys.executable, str(SRC / "examples" / "from_python.py"), str(tmp_path)],
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "from_python.png").stat().st_size > 10000
    assert "positive" in r.stdout


def test_sigint_handler_restored_after_concurrent_runs(tmp_path):
    """favor.run in two threads at once: when both are done, Ctrl-C is Python's again
    (KeyboardInterrupt), not favor's stop handler left behind by the run that started second."""
    import threading
    errors = []

    def one(i, barrier):
        try:
            barrier.wait()
            favor.run(dict(CONFIG), out=tmp_path / f"r{i}", trials=6)
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    for _ in range(3):   # each round both runs overlap (they start together and take ~0.1 s)
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=one, args=(i, barrier)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    try:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)   # delivered to this thread before it returns
            for _ in range(1000):                # Python runs its handler at the next bytecode
                pass
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_nul_in_paths_refused(tmp_path):
    """A NUL in a path (a keyword the CLI cannot even pass) is refused before any work, never
    cut to the path before it."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(CONFIG))
    with pytest.raises(favor.Error, match=r"holds a NUL character \(\\u0000\) at offset"):
        favor.run(cfg, out=str(tmp_path / "a") + "\0b")
    with pytest.raises(favor.Error, match="name: holds a NUL character"):
        favor.run(dict(CONFIG, name="x\0y"), out=tmp_path / "o")
    with pytest.raises(favor.Error, match="holds a NUL character"):
        favor.validate(str(cfg) + "\0.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


def test_validate_grid_keywords_as_cli(tmp_path):
    """validate takes m, num_features and L as run does, with the CLI's text and messages."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(CONFIG))
    with pytest.warns(UserWarning):
        v = favor.validate(cfg, m=[8, 16], L=64, threads=1, max_memory="4G")
    assert v["config"]["m"] == [8, 16] and v["config"]["inputs"]["L"] == [64]
    # A fixed budget: without it the text names the machine's MemAvailable, which moves between calls.
    assert v["text"] == cli("validate", cfg, "--m", "8,16", "--L", 64, "--threads", 1, "--max-memory", "4G").stdout
    with pytest.raises(favor.Error) as e:
        favor.validate(cfg, m=4, num_features=8)
    assert "favor: " + str(e.value) + "\n" == cli("validate", cfg, "--m", 4, "--num-features", 8).stderr


def test_apply_default_projection_is_one_the_map_takes():
    """maclaurin takes iid W only: without projection= it runs with iid (apply's default,
    orthogonal, would be refused), the same numbers as projection="iid"."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(1, 16, 8)) * 0.5 for _ in range(3))
    a = favor.attention(q, k, v, features="maclaurin", m=16, seed=4)
    b = favor.attention(q, k, v, features="maclaurin", m=16, seed=4, projection="iid")
    assert np.array_equal(a, b)
