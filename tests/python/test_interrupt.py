"""Ctrl-C interrupts every blocking call at once: a KeyboardInterrupt within a second, and the fleet's
exit (the `with` block's) stops the start under way, leaving no process behind."""
import os
import signal
import subprocess
import time

import pytest

import ortfleet

DELAY = "ORTFLEET_TEST_WORKER_START_DELAY"  # test hook: the worker of DEVICE sleeps SECONDS before starting
SLIM = {"session": {"intra_op_threads": 1, "thread_spinning": False}}

# Each blocks while the worker starts (30 s): wait() until every device is done, run() and run_async()
# until their device is.
CALLS = {
    "wait": "fleet.wait()",
    "wait_timeout": "fleet.wait(timeout=600)",
    "run": "fleet.run(0, {'input': np.zeros((1, 64), np.float32)})",
    "run_async": "fleet.run_async('cpu', {'input': np.zeros((1, 64), np.float32)}).result()",
}


def _script(model, call):
    return f"""
import signal, time, numpy as np, ortfleet
# As at a terminal: Python's own SIGINT handler (a test runner started in the background has SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
fleet = ortfleet.Fleet({model!r}, devices="cpu", strategy="processes", pool=False, config={SLIM!r})
with fleet:
    fleet.start()
    while not fleet.status()[0]["pid"]:  # spawned in the background
        time.sleep(0.01)
    print("worker", fleet.status()[0]["pid"], flush=True)
    try:
        {call}
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
        raise
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("call", sorted(CALLS))
def test_ctrl_c_interrupts_the_call_at_once_and_leaves_nothing_running(models, call, python_exe):
    env = dict(os.environ, **{DELAY: "cpu=30"})
    job = subprocess.Popen([python_exe, "-c", _script(models["mlp"], CALLS[call])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env)
    try:
        first = job.stdout.readline().split()
        assert first[:1] == ["worker"], first + [job.stderr.read()]
        worker = int(first[1])
        assert _alive(worker)
        time.sleep(0.5)  # well inside the call, which waits 30 s for the worker
        sent = time.monotonic()
        job.send_signal(signal.SIGINT)
        line = job.stdout.readline().split()
        if line[:1] != ["interrupted"]:
            job.kill()
            pytest.fail(f"no KeyboardInterrupt: {line}\n{job.stderr.read()}")
        assert float(line[1]) - sent < 1.0, f"KeyboardInterrupt came {float(line[1]) - sent:.2f} s after SIGINT"
        rc = job.wait(timeout=10)  # the with block's exit stopped the worker, which was still starting
        exited = time.monotonic()
    finally:
        if job.poll() is None:
            job.kill()
    stderr = job.stderr.read()
    assert rc != 0 and "KeyboardInterrupt" in stderr, stderr
    assert exited - sent < 5, f"the job took {exited - sent:.1f} s to end after SIGINT"
    assert not _alive(worker), f"the worker {worker} still runs"



@pytest.mark.parametrize("strategy", ["fleet", "threads"])
def test_a_script_that_ends_while_a_daemon_thread_runs_the_fleet_exits_cleanly(models, strategy, run_script):
    # The daemon thread is inside fleet.run() (the GIL released) when the interpreter exits: CPython ends
    # it as it takes the GIL back, and the process exits as any script does. It aborted: "terminate called
    # without an active exception", SIGABRT (py::gil_scoped_release's noexcept destructor; issue 58's audit).
    code = f"""
import threading, time, numpy as np, ortfleet
fleet = ortfleet.Fleet({models["mlp"]!r}, devices="cpu", strategy={strategy!r}, pool=False)
fleet.start()
assert fleet.wait()
def work():
    while True:
        fleet.run(0, {{"input": np.zeros((1, 64), np.float32)}})
threading.Thread(target=work, daemon=True).start()
time.sleep(0.2)
print("leaving", flush=True)
"""
    rc, out, err = run_script(code)
    assert "leaving" in out
    assert "terminate called" not in err
    assert rc == 0, err
