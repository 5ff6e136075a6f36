"""favor.study and `python3 -m favor study` against bad captures, bad options and failures
midway (issue 56; docs/design.md 9.3): one line (favor.Error, exit 2) before anything is run
or written, an earlier study in --out kept byte for byte, no temporary left beside or inside it.
Small synthetic captures (one head, L = 16, d = 4), budget 8, 2 trials: about a second each.

Run: FAVOR=build/favor PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python_module/test_study_hostile.py
"""
import errno
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pandas")
import favor  # noqa: E402
import favor._study  # noqa: E402
from favor import __main__ as cli  # noqa: E402

FAST = dict(budgets=(8,), trials=2, threads=1)
ARGS = ["--budgets", "8", "--trials", "2", "--threads", "1"]


def make_capture(folder, layers=1, H=1, L=16, d=4, seed=0):
    """A capture as scripts/capture_qkv.py writes one (manifest.json, layer<i>/{q,k,v}.npy with
    their sha256), random float32 heads, causal."""
    rng = np.random.default_rng(seed)
    entries = []
    for i in range(layers):
        os.makedirs(os.path.join(folder, f"layer{i}"))
        files = {}
        for w in "qkv":
            rel = f"layer{i}/{w}.npy"
            np.save(os.path.join(folder, rel), rng.normal(size=(1, H, L, d)).astype(np.float32))
            with open(os.path.join(folder, rel), "rb") as f:
                files[w] = {"path": rel, "shape": [1, H, L, d], "dtype": "float32",
                            "sha256": hashlib.sha256(f.read()).hexdigest()}
        entries.append({"index": i, "name": f"attn{i}", "module": "Synthetic", "B": 1, "H": H, "L": L, "Lk": L,
                        "d": d, "d_v": d, "causal": True, "files": files})
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump({"format": "favor capture 1", "layers": entries}, f)
    return str(folder)


def edit_manifest(cap, change):
    path = os.path.join(cap, "manifest.json")
    with open(path) as f:
        man = json.load(f)
    change(man["layers"])
    with open(path, "w") as f:
        json.dump(man, f)


def snapshot(folder):
    """Every file under folder: its bytes by relative path."""
    files = {}
    for root, _, names in os.walk(folder):
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                files[os.path.relpath(os.path.join(root, n), folder)] = f.read()
    return files


@pytest.fixture
def earlier(tmp_path):
    """A two-layer capture and a finished study of it in tmp_path/out, with its files' bytes."""
    cap = make_capture(tmp_path / "cap", layers=2)
    out = str(tmp_path / "out")
    favor.study(cap, out=out, **FAST)
    return cap, out, snapshot(out)


def assert_intact(earlier):
    """out holds exactly the earlier study's bytes and nothing lies beside it but the capture."""
    cap, out, files = earlier
    assert snapshot(out) == files
    assert sorted(os.listdir(os.path.dirname(out))) == ["cap", "out"]


def fail_on_second_run(monkeypatch, exc):
    real, calls = favor._study._run, []

    def run(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise exc
        return real(*a, **k)
    monkeypatch.setattr(favor._study, "_run", run)


def test_budget_that_validation_refuses_keeps_the_earlier_study(earlier):
    """Every planned config is validated before the first run: an odd budget (trig needs an even
    m) is refused naming the layer and budget, and the earlier study (another seed: its runs
    would differ) is untouched."""
    with pytest.raises(favor.Error, match=r"^layer 0, F = 9: "):
        favor.study(earlier[0], out=earlier[1], budgets=(8, 9), trials=2, seed=1)
    assert_intact(earlier)


def test_later_run_failing_keeps_the_earlier_study(earlier, monkeypatch):
    """The runs go into a temporary swapped in at the end: layer 1's run failing leaves layer 0's
    earlier result set, the report and nothing else as they were."""
    fail_on_second_run(monkeypatch, favor.Error("layer1/q.npy: cannot read"))
    with pytest.raises(favor.Error, match="cannot read"):
        favor.study(earlier[0], out=earlier[1], budgets=(8,), trials=2, seed=1)
    assert_intact(earlier)


def test_ctrl_c_says_the_study_was_interrupted(earlier, monkeypatch, capsys):
    """Ctrl-C during the second run: one line saying the study was interrupted and --out is as
    it was (not favor.run's resume=True advice), exit 130, the earlier study intact."""
    fail_on_second_run(monkeypatch, KeyboardInterrupt("stopped by SIGINT after 1 of 2 trials; resume=True continues"))
    try:
        rc = cli.main(["study", earlier[0], *ARGS, "--out", earlier[1]])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped python3 -m favor study")
    err = capsys.readouterr().err
    assert rc == 130 and err.count("\n") == 1 and "interrupted" in err and "as it was" in err
    assert "resume" not in err
    assert_intact(earlier)


def test_sigterm_during_the_report_leaves_no_temporary(earlier):
    """SIGTERM while the report is drawn (a subprocess: the default action would end pytest): one
    line, exit 143, no .report.* inside --out, no temporary beside it, the earlier study intact."""
    script = ("import os, signal, sys\nimport favor._study\nfrom favor import __main__\n"
              "favor._study._figure = lambda *a, **k: os.kill(os.getpid(), signal.SIGTERM)\n"
              "sys.exit(__main__.main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", script, "study", earlier[0], *ARGS, "--out", earlier[1]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 143 and r.stderr.count("\n") == 1 and "SIGTERM" in r.stderr, (r.returncode, r.stderr)
    assert_intact(earlier)


def test_disk_full_during_the_report_is_one_line(earlier, monkeypatch, capsys):
    """An OSError while the report is written (disk full): one line naming --out, exit 2."""
    def full(table, budgets, path, title):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    monkeypatch.setattr(favor._study, "_figure", full)
    rc = cli.main(["study", earlier[0], *ARGS, "--out", earlier[1]])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"favor study: out {earlier[1]}: ")
    assert os.strerror(errno.ENOSPC) in err
    assert_intact(earlier)


def test_concurrent_study_into_the_same_out_is_refused(tmp_path, monkeypatch):
    """One lock per --out for the whole study: a second study started while the first runs gets
    one line naming the holder, and the first finishes with its own report."""
    cap = make_capture(tmp_path / "cap")
    out = str(tmp_path / "out")
    real, second = favor._study._run, []

    def run_and_race(*a, **k):
        if not second:   # the first run of the first study: a second study starts
            second.append("started")
            try:
                favor.study(cap, out=out, **FAST)
                second[0] = "the second study ran"
            except favor.Error as e:
                second[0] = str(e)
        return real(*a, **k)
    monkeypatch.setattr(favor._study, "_run", run_and_race)
    favor.study(cap, out=out, seed=3, **FAST)
    assert second == [f"out {out}: another favor process (pid {os.getpid()}) is writing this folder; "
                      "wait for it or choose another --out"]
    assert json.load(open(os.path.join(out, "study.json")))["seed"] == 3
    assert sorted(os.listdir(tmp_path)) == ["cap", "out"]


@pytest.mark.parametrize("index", ["0/../../../victim", True, -1, 1.0, None])
def test_layer_index_is_a_non_negative_integer(tmp_path, index):
    """A layer's index names its folder: a text (a path), a bool, a negative or a float index is
    refused, nothing written inside or outside --out."""
    cap = make_capture(tmp_path / "cap")
    edit_manifest(cap, lambda lays: lays[0].update(index=index))
    with pytest.raises(favor.Error, match=r"layers\[0\]\.index: a non-negative integer"):
        favor.study(cap, out=str(tmp_path / "a" / "out"), **FAST)
    assert sorted(os.listdir(tmp_path)) == ["cap"]


def test_duplicate_layer_index_is_refused(tmp_path):
    cap = make_capture(tmp_path / "cap", layers=2)
    edit_manifest(cap, lambda lays: lays[1].update(index=0))
    with pytest.raises(favor.Error, match=r"layers\[1\]\.index: 0 again \(layers\[0\] has it\)"):
        favor.study(cap, out=str(tmp_path / "out"), **FAST)
    assert not os.path.exists(tmp_path / "out")


def test_out_with_files_of_the_users_is_refused(tmp_path):
    """A non-empty --out that is not a study (no study.json) is refused, its files untouched."""
    cap = make_capture(tmp_path / "cap")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("my notes\n")
    with pytest.raises(favor.Error, match="not empty and not a favor study"):
        favor.study(cap, out=str(out), **FAST)
    assert snapshot(out) == {"report.md": b"my notes\n"} and sorted(os.listdir(tmp_path)) == ["cap", "out"]


@pytest.mark.parametrize("value", ["false", 0, None])
def test_causal_is_a_json_boolean(tmp_path, value):
    """causal "false" was studied as causal (bool("false")): only true or false."""
    cap = make_capture(tmp_path / "cap")
    edit_manifest(cap, lambda lays: lays[0].update(causal=value))
    with pytest.raises(favor.Error, match=r"layers\[0\]\.causal: true or false"):
        favor.study(cap, out=str(tmp_path / "out"), **FAST)


def test_file_changed_after_the_capture_is_refused(tmp_path):
    """The manifest's sha256 of each file is checked before any run: a replaced q.npy (same
    shape) is one line naming it."""
    cap = make_capture(tmp_path / "cap")
    np.save(os.path.join(cap, "layer0", "q.npy"), np.ones((1, 1, 16, 4), np.float32))
    with pytest.raises(favor.Error, match=r"layer0/q\.npy: sha256 .* not the manifest's"):
        favor.study(cap, out=str(tmp_path / "out"), **FAST)
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("key, value, file", [("L", 32, "q"), ("Lk", 8, "k"), ("d_v", 3, "v"), ("H", 2, "q")])
def test_manifest_shapes_are_the_files(tmp_path, key, value, file):
    """B, H, L, Lk, d, d_v against the .npy headers: the first file that disagrees is named with
    the manifest's values."""
    cap = make_capture(tmp_path / "cap")
    edit_manifest(cap, lambda lays: lays[0].update({key: value}))
    with pytest.raises(favor.Error, match=rf"layer0/{file}\.npy: shape \(1, 1, 16, 4\), but the manifest's "
                                          rf"layer 0 has \(B, H, .*\) = "):
        favor.study(cap, out=str(tmp_path / "out"), **FAST)


@pytest.mark.parametrize("change, field", [
    (lambda lay: lay.pop("B"), r"layers\[0\]\.B: a positive integer, got null"),
    (lambda lay: lay.update(H="1"), r"layers\[0\]\.H: a positive integer, got \"1\""),
    (lambda lay: lay["files"].pop("v"), r"layers\[0\]\.files: an object with q, k and v"),
    (lambda lay: lay["files"]["k"].update(path=7), r"layers\[0\]\.files\.k: an object with a path"),
    (lambda lay: lay.update(files=[]), r"layers\[0\]\.files: "),
])
def test_missing_or_ill_typed_manifest_key(tmp_path, change, field):
    """A missing or ill-typed key of a layer: one line naming manifest.json and the key (a
    KeyError's traceback before), nothing written."""
    cap = make_capture(tmp_path / "cap")
    edit_manifest(cap, lambda lays: change(lays[0]))
    with pytest.raises(favor.Error, match=r"manifest\.json: " + field):
        favor.study(cap, out=str(tmp_path / "out"), **FAST)
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("budgets", ["99999999999999999999", "8,x", "0", "8,-8", [8.5], "", "2000000"])
def test_budgets_are_checked_as_budgets(tmp_path, budgets, capsys):
    """--budgets is checked by the study, not reported in the internal config's terms (a window
    that does not fit in 64 bits): one line naming budgets, exit 2."""
    cap = make_capture(tmp_path / "cap")
    with pytest.raises(favor.Error, match=r"^budgets: positive integers up to 1048576"):
        favor.study(cap, out=str(tmp_path / "out"), budgets=budgets, trials=2)
    if isinstance(budgets, str):
        assert cli.main(["study", cap, "--budgets", budgets, "--out", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err.startswith("favor study: budgets: ")
    assert not os.path.exists(tmp_path / "out")


def make_fits(fits):
    """fits/t2r.npz (a fitted t2r map of one d = 4 head, as scripts/fit_maps.py writes one) and
    fits/variants.json naming it relative to its folder."""
    fits.mkdir()
    rng = np.random.default_rng(1)
    np.savez(fits / "t2r.npz", **{f"layer0.{s}_A": rng.normal(size=(1, 4, 8)) for s in "qk"},
             **{f"layer0.{s}_b": rng.normal(size=(1, 8)) * 0.3 + 2.0 for s in "qk"})
    (fits / "t2r.json").write_text(json.dumps({"kind": "t2r", "layers": {"layer0": {"heads": 1, "fitted_on": None}}}))
    (fits / "variants.json").write_text(json.dumps({"variants": [{"features": "t2r", "weights": "t2r.npz:layer0"}]}))


def test_variants_weights_from_the_files_folder(tmp_path, monkeypatch):
    """--variants DIR/variants.json: a relative "weights" is taken from DIR (section 5's rule),
    not the working directory."""
    cap = make_capture(tmp_path / "cap")
    fits = tmp_path / "fits"
    make_fits(fits)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    favor.study(cap, out=str(tmp_path / "out"), variants=str(fits / "variants.json"), **FAST)
    run = json.load(open(tmp_path / "out" / "layer0" / "F8" / "run.json"))
    assert run["config"]["variants"][0]["weights"] == str(fits / "t2r.npz") + ":layer0"


def test_capture_inside_out_is_refused(tmp_path):
    """The study replaces --out whole: a capture inside it would go with it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "study.json").write_text("{}")
    cap = make_capture(out / "cap")
    with pytest.raises(favor.Error, match=r"layer0/q\.npy: inside out .*replaces whole"):
        favor.study(cap, out=str(out), **FAST)
    assert os.path.isfile(os.path.join(cap, "manifest.json"))


def test_study_json_records_no_path_of_this_machine(tmp_path):
    """Issue 56 item 16: study.json names the capture relative to the study's folder."""
    cap = make_capture(tmp_path / "cap")
    out = tmp_path / "deep" / "study"
    favor.study(cap, out=str(out), **FAST)
    info = json.loads((out / "study.json").read_text())
    assert not os.path.isabs(info["capture"]) and str(tmp_path) not in json.dumps(info), info["capture"]
    assert os.path.samefile(os.path.join(out, info["capture"]), cap)


def test_relative_arguments_record_relative_paths(tmp_path, monkeypatch):
    """Issue 56 item 16: a study given relative paths records them relative to the working
    directory (as favor.run resolves a dict's paths) in every run.json, no path of this machine:
    the inputs, the --variants file's weights (from its folder) and each run's output_dir, the
    temporary it was written in. Absolute arguments stay absolute."""
    monkeypatch.chdir(tmp_path)
    make_capture(tmp_path / "cap")
    make_fits(tmp_path / "fits")
    favor.study("cap", out="res/study", variants="fits/variants.json", **FAST)
    written = [os.path.join(root, n) for root, _, names in os.walk("res/study") for n in names if n.endswith(".json")]
    assert {"res/study/study.json", "res/study/layer0/F8/run.json"} <= set(written)
    assert [f for f in written if str(tmp_path) in open(f).read()] == []
    cfg = json.load(open("res/study/layer0/F8/run.json"))["config"]
    assert [cfg["inputs"][w] for w in "qkv"] == [f"cap/layer0/{w}.npy" for w in "qkv"]
    assert cfg["variants"][0]["weights"] == "fits/t2r.npz:layer0"
    assert cfg["output_dir"].startswith("res/.study.favor-tmp-") and cfg["output_dir"].endswith("/layer0/F8")
    favor.study(str(tmp_path / "cap"), out=str(tmp_path / "abs"), variants=str(tmp_path / "fits" / "variants.json"),
                **FAST)
    cfg = json.load(open("abs/layer0/F8/run.json"))["config"]
    assert cfg["inputs"]["q"] == str(tmp_path / "cap" / "layer0" / "q.npy")
    assert cfg["variants"][0]["weights"] == str(tmp_path / "fits" / "t2r.npz") + ":layer0"
    assert cfg["output_dir"].startswith(str(tmp_path / ".abs.favor-tmp-"))


@pytest.mark.parametrize("F", [8, 9, 64])
def test_non_causal_windows_sit_at_exactly_F(F):
    """Issue 56 item 13: a non-causal window of w holds 2w - 1 keys, so the default families keep
    every variant at exactly F columns either way (one cell per budget in the study)."""
    for causal in (True, False):
        for v in favor._study.default_variants(F, 4, causal):
            if "window" not in v:
                continue
            w, s = v["window"], v.get("sinks", 0)
            keys = (w if causal else 2 * w - 1) + s
            rest = {"none": 0, "t2r": 4}.get(v["features"])
            assert keys + (rest if rest is not None else 1) <= F and (rest is None or keys + rest == F), (causal, v)


def test_non_causal_study_runs_every_variant_at_F(tmp_path):
    cap = make_capture(tmp_path / "cap")
    path = favor.study(cap, out=str(tmp_path / "s"), causal="no", **FAST)
    import pandas as pd
    errors = pd.read_csv(os.path.join(os.path.dirname(path), "layer0", "F8", "errors.csv"))
    assert set(errors["num_features"]) == {8}, sorted(set(errors["num_features"]))
