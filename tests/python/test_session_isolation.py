"""The test session keeps off the user's own warm pool: a test file run alone (test_real_models.py left a
pool daemon on the user's real socket, issue 50), with no fixture of its own, leaves nothing on the
socket of the user's runtime folder, and no pool of its own running after the session."""
import os
import pathlib
import shutil
import subprocess
import sys

import ortfleet

HERE = pathlib.Path(__file__).resolve().parent

A_TEST_WITHOUT_FIXTURES = '''
import ortfleet

def test_a_start_that_would_leave_a_pool(tmp_path):
    model = ortfleet.synth_mlp(str(tmp_path / "mlp.onnx"))
    with ortfleet.Fleet(model, devices="cpu").start() as fleet:
        assert fleet.wait(120), fleet.status()
    print("SOCKET", ortfleet.default_pool_socket())
'''


def test_a_file_run_alone_leaves_no_pool_on_the_users_socket(tmp_path):
    users_runtime = tmp_path / "users-run"
    users_runtime.mkdir(mode=0o700)
    session = tmp_path / "session"
    session.mkdir()
    shutil.copy(HERE / "conftest.py", session / "conftest.py")
    (session / "test_alone.py").write_text(A_TEST_WITHOUT_FIXTURES)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(users_runtime))
    env.pop("ORTFLEET_AUTO_POOL", None)  # as a user's shell has it
    env.pop("ORTFLEET_CACHE", None)
    env["HOME"] = str(tmp_path / "home")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(session / "test_alone.py")],
                              capture_output=True, text=True, env=env, cwd=session, timeout=300)
    finally:
        leaked = users_runtime / "ortfleet" / "pool.sock"
        if leaked.exists():
            ortfleet.pool_stop(str(leaked))  # what an isolation that failed left: not for later tests
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (users_runtime / "ortfleet").exists(), "the session left something in the user's runtime folder: " + \
        str(list((users_runtime / "ortfleet").iterdir()))
    used = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("SOCKET ")]
    assert used and not used[0].startswith(str(users_runtime)), used
    assert not os.path.exists(used[0]), "a pool of the session still runs on " + used[0]
    assert not (tmp_path / "home" / ".cache" / "ortfleet").exists(), "the session used the user's own model cache"
