"""`pip install .` as a user runs it beside a built tree: it packs that build rather than building
again, and the installed package carries the ONNX Runtime it loads, so that it starts sessions from
any folder with the checkout's .deps/ hidden. With no ONNX Runtime anywhere, its error speaks Python
(ort_library=, ORTFLEET_ORT_LIB), not the command line's --ort-lib."""
import filecmp
import hashlib
import importlib.util
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


def test_the_ortfleet_command_starts_no_python(site, tmp_path):
    """The command execs the package's binary with no interpreter in between: a console script's Python
    wrapper cost every call ~45 ms (the warm pool's next job takes 10-20 ms). With every Python start made
    to fail (PYTHONHOME nowhere), it still runs, and it is the package's binary that runs (its unit names it)."""
    command = site / "bin" / "ortfleet"
    assert "python" not in command.read_text().splitlines()[0], command.read_text().splitlines()[0]
    env = {**os.environ, "PYTHONHOME": str(tmp_path / "nowhere"), "PYTHONPATH": str(tmp_path / "nowhere")}
    broken = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, env=env)
    assert broken.returncode != 0, "Python starts even with PYTHONHOME nowhere: the check below would prove nothing"
    r = subprocess.run([str(command), "serve", "--print-unit"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    binary = (site / "ortfleet" / "bin" / "ortfleet").resolve()
    assert f"ExecStart={binary} serve " in r.stdout, r.stdout


def test_a_link_to_the_ortfleet_command_runs_it(site, tmp_path):
    link = tmp_path / "elsewhere" / "ortfleet"
    link.parent.mkdir()
    link.symlink_to(site / "bin" / "ortfleet")
    r = subprocess.run([str(link), "--version"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ortfleet 0."), r.stdout + r.stderr


@pytest.fixture
def backend(tmp_path, monkeypatch):
    """The build backend of a checkout at tmp_path/checkout (its ROOT), with the steps it would run recorded
    rather than run."""
    checkout = tmp_path / "checkout"
    (checkout / "python" / "build_backend").mkdir(parents=True)
    shutil.copy(ROOT / "python" / "build_backend" / "ortfleet_build.py", checkout / "python" / "build_backend")
    (checkout / ".deps" / "onnxruntime" / "include").mkdir(parents=True)
    (checkout / ".deps" / "web").mkdir(parents=True)
    (checkout / ".deps" / "web" / "echarts.min.js").write_text("")
    monkeypatch.delenv("ORTFLEET_BUILD_DIR", raising=False)
    monkeypatch.delenv("ORTFLEET_PREFIX", raising=False)
    spec = importlib.util.spec_from_file_location("ortfleet_build_copy", checkout / "python" / "build_backend" / "ortfleet_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ran = []
    monkeypatch.setattr(module, "_run", module.ran.append)
    return module, checkout


def write_cache(build, source):
    build.mkdir(parents=True, exist_ok=True)
    (build / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={build}\nCMAKE_HOME_DIRECTORY:INTERNAL={source}\n")


def test_a_copied_build_tree_is_neither_built_nor_packed(backend, tmp_path):
    """A checkout copied with its build/release: its CMakeCache.txt names the original (CMake refuses it) and
    its build.ninja runs in the original tree, so `cmake --build` there built and packed the original
    checkout. The copy builds in a folder of its own, and no step names the original."""
    module, checkout = backend
    original = tmp_path / "original"
    write_cache(checkout / "build" / "release", original)  # as `cp -a original checkout` leaves it
    extension = checkout / "build" / "release" / "python" / "ortfleet" / EXTENSION
    extension.parent.mkdir(parents=True)
    extension.write_text("")
    out = module._package_dir(str(tmp_path / "tmp"))
    own = checkout / "build" / "pip-release"
    assert out == str(own / "python")
    assert ["cmake", "--preset", "release", "-S", str(checkout), "-B", str(own)] == module.ran[0][:7], module.ran
    assert ["cmake", "--build", str(own), "--target", "ortfleet_python"] == module.ran[1], module.ran
    assert not any(str(original) in " ".join(step) or str(checkout / "build" / "release") in " ".join(step) for step in module.ran), module.ran


def test_the_checkouts_own_build_tree_is_packed(backend, tmp_path):
    module, checkout = backend
    write_cache(checkout / "build" / "release", checkout)
    extension = checkout / "build" / "release" / "python" / "ortfleet" / EXTENSION
    extension.parent.mkdir(parents=True)
    extension.write_text("")
    assert module._package_dir(str(tmp_path / "tmp")) == str(checkout / "build" / "release" / "python")
    assert module.ran == [["cmake", "--build", str(checkout / "build" / "release"), "--target", "ortfleet_python"]]


def test_a_named_build_tree_of_another_checkout_is_refused(backend, tmp_path, monkeypatch):
    module, checkout = backend
    copied = tmp_path / "copied-build"
    write_cache(copied, tmp_path / "original")
    (copied / "CMakeCache.txt").write_text((copied / "CMakeCache.txt").read_text().replace(str(copied), str(tmp_path / "original" / "build")))
    monkeypatch.setenv("ORTFLEET_BUILD_DIR", str(copied))
    with pytest.raises(SystemExit) as refused:
        module._package_dir(str(tmp_path / "tmp"))
    assert "was configured for" in str(refused.value) and str(tmp_path / "original") in str(refused.value), refused.value
    assert module.ran == []


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
