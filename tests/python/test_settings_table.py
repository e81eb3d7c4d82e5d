"""Fleet's keywords are the settings table's (include/ortfleet/base/settings.hpp): a setting added there with a
keyword is one of Fleet's, in its signature, its docstring and the stub, with the table's default, read and
checked the way the command line reads its flag (the same words in every refusal)."""
import ast
import os
import re
import subprocess

import pytest

import ortfleet
from ortfleet import _ortfleet

STUB = os.path.join(os.path.dirname(ortfleet.__file__), "_ortfleet.pyi")
CLI = os.path.join(os.path.dirname(ortfleet.__file__), "bin", "ortfleet")
SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


def table():
    return _ortfleet._settings()


def fleet_keywords():
    return [row for row in table() if row["fleet_keyword"]]


def signature_of(doc):
    """Fleet's keyword-only parameters, {name: default text}, from the first line of its docstring."""
    first = doc.split("\n", 1)[0]
    args = ast.parse(f"def f{first[len('__init__'):first.rindex('->')]}: pass").body[0].args
    return {a.arg: ast.literal_eval(d) for a, d in zip(args.kwonlyargs, args.kw_defaults)}


def stub_signature():
    with open(STUB, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    fleet = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Fleet")
    init = next(n for n in fleet.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {a.arg: ast.literal_eval(d) for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults)}


def test_fleets_signature_is_the_tables_keywords_with_their_defaults():
    want = {row["keyword"]: ast.literal_eval(row["python_default"]) for row in fleet_keywords()}
    assert len(want) >= 20, want
    assert signature_of(ortfleet.Fleet.__init__.__doc__) == want
    for row in fleet_keywords():
        assert f"\n{row['keyword']}: " in ortfleet.Fleet.__init__.__doc__, row["keyword"]


def test_the_stub_declares_the_same_keywords_and_defaults():
    want = {row["keyword"]: ast.literal_eval(row["python_default"]) for row in fleet_keywords()}
    assert stub_signature() == want


def test_the_keywords_kept_their_names():
    """The keywords of the Fleet before the table, each still there, with its default (scripts use them)."""
    before = {"strategy": "auto", "config": None, "warmup": 1, "ort_library": "", "profile_dir": "", "shapes": None, "batches": None,
              "max_shape_sessions": None, "pad_batch": None, "start_timeout": 7200.0, "run_timeout": 600.0, "pool": None,
              "warmup_inputs": None, "input_ranges": None, "buckets": None, "pad_values": None, "shape_policy": None,
              "model_cache_fill": None, "warm_pool_idle": None}
    said = signature_of(ortfleet.Fleet.__init__.__doc__)
    for keyword, default in before.items():
        assert keyword in said and said[keyword] == default, keyword


def test_every_flag_of_the_table_is_a_flag_of_the_command_line():
    helps = "".join(subprocess.run([CLI, *command, "--help"], capture_output=True, text=True, check=True).stdout
                    for command in (["start"], ["serve"]))
    for row in table():
        if row["flag"] and row["scope"] in ("fleet", "config", "serve", "output"):
            assert re.search(rf"[ ,]{re.escape(row['flag'])}[ ,]", helps), row["flag"]


@pytest.mark.parametrize("keyword, value, said", [
    ("max_shape_sessions", 0, "max_shape_sessions=0 is out of range: give a whole number from 1 to 256"),
    ("warm_pool_idle", -1, "warm_pool_idle=-1 is out of range: give a number of seconds from 0 to 604800"),
    ("warm_pool_park", float("inf"), "warm_pool_park=inf is out of range: give a number of seconds from 0 to 604800"),
    ("warmup", 10001, "warmup=10001 is out of range: give a whole number from 0 to 10000"),
    ("shape_policy", "always", "shape_policy=always is not one of measured, per-shape, shared"),
    ("model_cache_fill", "later", "model_cache_fill=later is not one of background, inline, off"),
])
def test_a_bad_keyword_is_refused_in_the_words_of_its_flag(models, keyword, value, said):
    with pytest.raises(ortfleet.Error) as e:
        ortfleet.Fleet(models["mlp"], devices="cpu", config=SLIM, **{keyword: value})
    assert str(e.value) == said


@pytest.mark.parametrize("flag, value, said", [
    ("--max-shape-sessions", "0", "--max-shape-sessions 0 is out of range: give a whole number from 1 to 256"),
    ("--warm-pool-idle", "-1", "--warm-pool-idle -1 is out of range: give a number of seconds from 0 to 604800"),
    ("--warm-pool-park", "inf", "--warm-pool-park inf is not a number: give a number of seconds from 0 to 604800"),
    ("--warmup", "10001", "--warmup 10001 is out of range: give a whole number from 0 to 10000"),
    ("--shape-policy", "always", "--shape-policy always is not one of measured, per-shape, shared"),
])
def test_the_same_value_on_the_command_line(models, flag, value, said):
    r = subprocess.run([CLI, "start", models["mlp"], "--devices", "cpu", flag, value], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert said in r.stderr, r.stderr


@pytest.mark.parametrize("call, said", [
    (lambda m: ortfleet.Fleet(m + "\0x", devices="cpu"), "Fleet(): model holds a NUL byte"),
    (lambda m: ortfleet.Fleet(m, devices="cpu", ort_library="lib\0.so"), "Fleet(): ort_library holds a NUL byte"),
    (lambda m: ortfleet.profile(m + "\0x"), "ortfleet.profile(): model holds a NUL byte"),
    (lambda m: ortfleet.synth_mlp(m + "\0.onnx"), "ortfleet.synth_mlp(): path holds a NUL byte"),
])
def test_a_path_with_a_nul_byte_is_refused_not_cut(models, call, said):
    with pytest.raises(ortfleet.Error) as e:
        call(models["mlp"])
    assert str(e.value).startswith(said + ", which no path or name holds"), str(e.value)


def test_the_new_keywords_reach_the_fleet(models, private_runtime_dir, monkeypatch):
    """narrow_workers, one_process and warm_pool_park, which only flags or the config gave before."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", private_runtime_dir[0])
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="processes", config=SLIM, narrow_workers=False, warm_pool_park=5) as fleet:
        assert fleet.start().wait()
    with pytest.raises(TypeError, match=r"Fleet\(\): one_process takes True or False, not str \('yes'\)"):
        ortfleet.Fleet(models["mlp"], devices="cpu", strategy="processes", one_process="yes")


def test_an_unknown_ortfleet_variable_is_warned_about_once(models, monkeypatch, caplog):
    monkeypatch.setenv("ORTFLEET_WARMPOOL_PARK", "30")
    monkeypatch.setenv("ORTFLEET_AUTO_POOL", "0")
    with caplog.at_level("WARNING", logger="ortfleet"):
        ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM).shutdown()
        ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM).shutdown()
    warned = [r.getMessage() for r in caplog.records if "ORTFLEET_WARMPOOL_PARK" in r.getMessage()]
    assert len(warned) <= 1, warned  # once in the process's life (an earlier test may have said it already)


def test_a_bad_variable_is_refused_by_the_constructor(models, monkeypatch):
    monkeypatch.setenv("ORTFLEET_WARM_POOL_IDLE", "abc")
    with pytest.raises(ortfleet.Error) as e:
        ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM)
    assert str(e.value).startswith("ORTFLEET_WARM_POOL_IDLE='abc' is not a number: give a number of seconds from 0 to 604800"), str(e.value)
