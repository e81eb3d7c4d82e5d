"""What a Python job leaves running, said where a Python user sees it: a warm pool left on the node
comes with one ortfleet.LeftBehindWarning, in Python's terms; left_behind() is complete when wait()
returns; pool_stop() is idempotent."""
import os
import time

import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}


def _job(model, body):
    return (
        "import ortfleet\n"
        f"with ortfleet.Fleet({model!r}, devices='cpu', config={SLIM!r}) as fleet:\n"
        "    assert fleet.start().wait(120)\n" + "".join(f"    {line}\n" for line in body)
    )


def _pool_pid(socket):
    return ortfleet.pool_status(socket)["pid"]


def _gone(pid, within_s=30):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


def test_a_job_that_leaves_a_warm_pool_says_so_once_in_pythons_terms(models, run_script, private_runtime_dir):
    runtime, socket = private_runtime_dir
    env = {"XDG_RUNTIME_DIR": runtime, "ORTFLEET_AUTO_POOL": None}
    rc, stdout, stderr = run_script(_job(models["mlp"], ["print('ran')"]), env=env)
    assert rc == 0, stderr
    assert stdout == "ran\n"
    lines = [line for line in stderr.splitlines() if "LeftBehindWarning" in line]
    assert len(lines) == 1, stderr
    assert "ortfleet left a warm pool for the next job on this node" in lines[0]
    assert socket in lines[0]
    assert "warm_pool_idle=0" in lines[0] and "pool=False" in lines[0] and "ortfleet.pool_stop()" in lines[0]
    assert "--warm-pool-idle" not in stderr
    # It is there, as said; stopped once it is gone, and a second stop is no error.
    pid = _pool_pid(socket)
    assert ortfleet.pool_stop(socket) is True
    assert _gone(pid), f"the pool daemon {pid} still runs"
    assert ortfleet.pool_stop(socket) is False
    assert not os.path.exists(socket)


def test_left_behind_is_complete_when_wait_returns(models, run_script, private_runtime_dir):
    runtime, socket = private_runtime_dir
    env = {"XDG_RUNTIME_DIR": runtime, "ORTFLEET_AUTO_POOL": None}
    body = ["notes = fleet.left_behind()", "print(len(notes))", "print(notes[0] if notes else '')"]
    rc, stdout, stderr = run_script(_job(models["mlp"], body), env=env)
    assert rc == 0, stderr
    count, note = stdout.splitlines()
    assert count == "1" and note.startswith("left a warm pool"), stdout
    assert "LeftBehindWarning" not in stderr  # read by the job itself: not said again
    assert ortfleet.pool_stop(socket) is True


def test_the_warning_can_be_silenced_or_made_an_error(models, run_script, private_runtime_dir):
    runtime, _ = private_runtime_dir
    env = {"XDG_RUNTIME_DIR": runtime, "ORTFLEET_AUTO_POOL": None}
    silenced = "import warnings, ortfleet\nwarnings.simplefilter('ignore', ortfleet.LeftBehindWarning)\n"
    rc, _, stderr = run_script(silenced + _job(models["mlp"], ["pass"]).replace("import ortfleet\n", ""), env=env)
    assert rc == 0 and "LeftBehindWarning" not in stderr, stderr
    # The pool the first job left is found by the next: nothing new is left, nothing said.
    rc, _, stderr = run_script(_job(models["mlp"], ["pass"]), env=env)
    assert rc == 0 and "LeftBehindWarning" not in stderr, stderr


def test_warm_pool_idle_0_and_pool_false_leave_nothing_and_say_nothing(models, run_script, private_runtime_dir):
    runtime, socket = private_runtime_dir
    env = {"XDG_RUNTIME_DIR": runtime, "ORTFLEET_AUTO_POOL": None}
    for keyword in ("warm_pool_idle=0", "pool=False"):
        code = _job(models["mlp"], ["print(fleet.left_behind())"]).replace("devices='cpu'", f"devices='cpu', {keyword}")
        rc, stdout, stderr = run_script("import warnings\nwarnings.simplefilter('error')\n" + code, env=env)
        assert rc == 0, stderr
        assert stdout == "[]\n"
        assert not os.path.exists(socket)
    assert ortfleet.pool_stop(socket) is False


def test_pool_stop_with_no_pool_is_false_every_time(tmp_path):
    socket = str(tmp_path / "none.sock")
    assert ortfleet.pool_stop(socket) is False
    assert ortfleet.pool_stop(socket) is False
    with pytest.raises(ortfleet.Error, match="no warm pool runs on"):
        ortfleet.pool_status(socket)
