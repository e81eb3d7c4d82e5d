"""`pip install .` as a user runs it beside a built tree: it packs that build rather than building
again, and the installed package carries the ONNX Runtime it loads, so that it starts sessions from
any folder with the checkout's .deps/ hidden. With no ONNX Runtime anywhere, its error speaks Python
(ort_library=, ORTFLEET_ORT_LIB), not the command line's --ort-lib."""
import filecmp
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("ORTFLEET_BUILD_DIR", ROOT / "build" / "release")).resolve()
EXTENSION = f"_ortfleet{sysconfig.get_config_var('EXT_SUFFIX')}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The package as `pip install --target` installs it from this checkout."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, env={**os.environ, "PIP_NO_INDEX": "1", "ORTFLEET_BUILD_DIR": str(BUILD)})
    return target


def run_hidden(code, site, cwd):
    """Runs Python code with only `site` on its path and the checkout's .deps/ an empty folder (a
    private mount), so that nothing of the checkout's set-up can be found."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("hiding .deps/ needs a private mount namespace (unshare -rm), which this machine refuses")
    empty = cwd / "empty"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTFLEET_ORT") and k != "ORTFLEET_BUILD_DIR"}
    env.update(PYTHONPATH=str(site), ORTFLEET_CACHE=str(cwd / "cache"), ORTFLEET_AUTO_POOL="0")
    hide = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", hide, "sh", str(empty), str(ROOT / ".deps"), sys.executable, "-c", code],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_the_wheel_packs_the_built_tree(site):
    installed = site / "ortfleet" / EXTENSION
    assert filecmp.cmp(installed, BUILD / "python" / "ortfleet" / EXTENSION, shallow=False), "the extension was built again"
    assert os.access(site / "ortfleet" / "bin" / "ortfleet-worker", os.X_OK)


def test_the_package_carries_each_runtime_file_once(site):
    """The build tree's lib/onnxruntime holds links (libonnxruntime.so -> .so.1 -> .so.1.29.0); a wheel
    holds none, and each was packed as another 28 MB copy of the core."""
    carried = sorted((site / "ortfleet" / "lib" / "onnxruntime").iterdir())
    assert carried, "the package carries no ONNX Runtime"
    contents = [p.read_bytes() for p in carried]
    assert len({hashlib.sha256(c).hexdigest() for c in contents}) == len(carried), [p.name for p in carried]


def test_the_installed_package_loads_its_own_runtime_before_the_checkouts(site, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORTFLEET_ORT")}
    r = subprocess.run([sys.executable, "-c", "import ortfleet; print(ortfleet.load_runtime()['path'])"],
                       capture_output=True, text=True, env={**env, "PYTHONPATH": str(site)}, cwd=tmp_path, check=True)
    assert (ROOT / ".deps" / "onnxruntime" / "lib").is_dir(), "the checkout is not set up (scripts/bootstrap.sh)"
    assert r.stdout.strip().startswith(str(site / "ortfleet" / "lib" / "onnxruntime")), r.stdout


def test_the_installed_package_starts_sessions_with_the_runtime_it_carries(site, tmp_path):
    carried = list((site / "ortfleet" / "lib" / "onnxruntime").glob("libonnxruntime.so*"))
    assert carried, "the package carries no ONNX Runtime"
    code = ("import os, numpy as np, ortfleet\n"
            "assert os.listdir(" + repr(str(ROOT / ".deps")) + ") == [], 'the checkout .deps/ is not hidden'\n"
            "rt = ortfleet.load_runtime()\n"
            "print(rt['path']); print(rt['source'])\n"
            "m = ortfleet.synth_mlp('mlp.onnx')\n"
            "with ortfleet.Fleet(m, devices='cpu', strategy='processes', pool=False) as f:\n"
            "    assert f.start().wait()\n"
            "    (out,) = f.run('cpu', {'input': np.ones((1, 64), np.float32)}).values()\n"
            "    print('ran', out.shape)\n")
    r = run_hidden(code, site, tmp_path)
    assert r.returncode == 0, r.stderr
    path, source, ran = r.stdout.splitlines()[:3]
    assert path.startswith(str(site / "ortfleet" / "lib" / "onnxruntime")), path
    assert source == "installed with ortfleet"
    assert ran.startswith("ran (1,")


def test_without_any_runtime_the_error_names_the_python_parameter(site, tmp_path):
    bare = tmp_path / "site"
    shutil.copytree(site, bare, symlinks=True, ignore=shutil.ignore_patterns("onnxruntime"))
    code = ("import sys, ortfleet\n"
            "found = ortfleet.doctor()['runtime']\n"
            "if found.get('loaded'):\n"
            "    print(found['path'], found['source']); sys.exit(77)\n"
            "try:\n"
            "    ortfleet.load_runtime()\n"
            "except ortfleet.Error as e:\n"
            "    print(e)\n"
            "else:\n"
            "    raise SystemExit('ONNX Runtime was found')\n")
    r = run_hidden(code, bare, tmp_path)
    if r.returncode == 77:
        pytest.skip(f"an ONNX Runtime outside the checkout is installed on this machine: {r.stdout.strip()}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no ONNX Runtime library found" in r.stdout
    assert "ort_library=PATH" in r.stdout and "ORTFLEET_ORT_LIB" in r.stdout and "pip install" in r.stdout
    assert "--ort-lib" not in r.stdout


def test_the_package_installs_an_ortfleet_command(site, tmp_path):
    """`ortfleet` lands on the environment's PATH (bin/ of the target here), running the command line the
    package carries: before, only `python -m ortfleet` did."""
    command = site / "bin" / "ortfleet"
    assert os.access(command, os.X_OK), f"no ortfleet command in {site / 'bin'}"
    r = subprocess.run([str(command), "--version"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ortfleet 0."), r.stdout


def test_pip_shows_the_builds_progress_on_the_terminal(tmp_path):
    """pip keeps a backend's output for -v; the build's steps reach the terminal pip runs in all the same
    (a pseudo-terminal here, made by `script`), with pip's own output quiet (-q)."""
    if shutil.which("script") is None:
        pytest.skip("`script` (util-linux) is not installed: no pseudo-terminal to run pip in")
    pip = f"{sys.executable} -m pip install -q --no-deps --target {tmp_path / 'site'} {ROOT}"
    r = subprocess.run(["script", "-qec", pip, "/dev/null"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PIP_NO_INDEX": "1", "ORTFLEET_BUILD_DIR": str(BUILD)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"ortfleet build \(\d+:\d\d\): cmake --build ", r.stdout), r.stdout
    assert re.search(r"ortfleet build \(\d+:\d\d\): \[\d+/\d+\] ", r.stdout), r.stdout  # Ninja's steps, as they come
    assert "packed ortfleet-0.1.0-" in r.stdout, r.stdout
