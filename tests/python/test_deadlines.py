"""Deadlines from Python: run() before start() is an error, wait(timeout) returns, a worker that never
answers fails its device at the start timeout."""
import numpy as np
import pytest

import ortfleet

SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}
DELAY = "ORTFLEET_TEST_WORKER_START_DELAY"  # test hook: the worker of DEVICE sleeps SECONDS before starting


def test_run_before_start_is_an_error(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="processes", config=SLIM) as fleet:
        with pytest.raises(ortfleet.Error, match=r"before start\(\)\. Call start\(\) first"):
            fleet.run("cpu", {"input": np.zeros((1, 64), np.float32)})


def test_wait_with_a_timeout_returns_false_while_a_device_starts(models, monkeypatch):
    monkeypatch.setenv(DELAY, "cpu=600")
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="processes", config=SLIM, start_timeout=2) as fleet:
        fleet.start()
        assert fleet.wait(timeout=0.05) is False
        assert fleet.status()[0]["state"] == "starting"
        assert fleet.wait() is False  # the start timeout fails the device: wait() returns
        status = fleet.status()[0]
        assert status["state"] == "failed"
        assert "cpu did not become ready within 2 s: its worker (pid" in status["error"]


def test_wait_with_a_timeout_returns_true_when_ready(models):
    with ortfleet.Fleet(models["mlp"], devices="cpu", strategy="threads", config=SLIM, run_timeout=60) as fleet:
        fleet.start()
        assert fleet.wait(timeout=600) is True
        with pytest.raises(ortfleet.Error, match="0 seconds or more"):
            fleet.wait(timeout=-1)


@pytest.mark.parametrize("keyword, value, said", [
    ("start_timeout", 0, "start_timeout=0"),
    ("start_timeout", float("inf"), "start_timeout=inf"),
    ("start_timeout", 1e309, "start_timeout=inf"),
    ("start_timeout", float("nan"), "start_timeout=nan"),
    ("run_timeout", -1, "run_timeout=-1"),
    ("run_timeout", 10**400, "run_timeout=inf"),
    ("run_timeout", 604801, "run_timeout=604801"),
])
def test_timeouts_are_bounded_as_the_command_lines(models, keyword, value, said):
    """What --timeout refuses (0, inf, more than a week), Fleet refuses too, in the same words: no value means
    'no deadline'."""
    with pytest.raises(ortfleet.Error) as e:
        ortfleet.Fleet(models["mlp"], devices="cpu", **{keyword: value})
    assert str(e.value) == f"{said} is out of range: give a number of seconds above 0 and at most 604800", str(e.value)


def test_a_pools_start_timeout_is_bounded_too():
    with pytest.raises(ortfleet.Error, match=r"start_timeout=inf is out of range: give a number of seconds above 0 and at most 604800"):
        ortfleet.Pool("cpu", start_timeout=float("inf"))
