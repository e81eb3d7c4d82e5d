"""A PEP 517 build backend for ortfleet that builds with the project's CMake and needs nothing from PyPI.

Three sources for the compiled parts, first match wins:
  a built tree         ORTFLEET_BUILD_DIR, else the checkout's build/release (what scripts/bootstrap.sh
                       built, or an earlier `pip install .`), when it holds the extension for this
                       Python: brought up to date with `cmake --build` (nothing to do after bootstrap)
                       and packed as it is: seconds
  ORTFLEET_PREFIX      an installed ortfleet (cmake --install): only the extension is compiled, against it
  otherwise            the checkout's build/release is configured (the CMake preset "release") and what
                       the package needs is built there: the library, the command line, the worker and
                       the extension, in batches, no tests (minutes: docs/python.md#install gives the
                       time); a later `pip install .` or scripts/bootstrap.sh reuses it
A build/release configured for another tree (copied with the checkout: CMake refuses its CMakeCache.txt,
and its build.ninja runs in the original tree) is neither built nor packed: the checkout builds in
build/pip-release, a folder of its own.

pip shows a backend's output only with -v, so the build's progress ([12/48] ...) is also written to the
terminal pip runs in (/dev/tty), where there is one.

The wheel carries the ONNX Runtime that the built ortfleet loads (its libonnxruntime*.so files, in
ortfleet/lib/onnxruntime, which the installed package searches before anything else but what the user
names), so that the installed package does not depend on the checkout's .deps/ folder, and an
`ortfleet` command that starts the command line the package carries with no Python in between (_launcher).
"""
import base64
import functools
import hashlib
import json
import os
import shutil
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile

NAME = "ortfleet"
VERSION = "0.1.0"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class _Progress:
    """Where a person sees the build: the terminal pip runs in, which pip leaves to its backend (it
    keeps the backend's stdout and stderr for -v and its log). Nothing where there is no terminal."""

    def __init__(self):
        self.started = time.monotonic()
        try:
            self.tty = open("/dev/tty", "w", buffering=1)  # noqa: SIM115  (held for the build)
        except OSError:
            self.tty = None

    def say(self, line):
        print("ortfleet build:", line, file=sys.stderr, flush=True)
        if self.tty is not None:
            elapsed = int(time.monotonic() - self.started)
            try:
                self.tty.write(f"\nortfleet build ({elapsed // 60}:{elapsed % 60:02d}): {line}")
            except OSError:
                self.tty = None

    def done(self):
        if self.tty is not None:
            try:
                self.tty.write("\n")
                self.tty.close()
            except OSError:
                pass
            self.tty = None


_PROGRESS = None
_STEP = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")  # Ninja's "[12/48] Building CXX object ..."


def _progress():
    global _PROGRESS
    if _PROGRESS is None:
        _PROGRESS = _Progress()
    return _PROGRESS


def _run(cmd):
    """Runs a step of the build: its output goes to stderr (pip -v, pip's log), and each of Ninja's steps
    ("[12/48] Linking ...") and each line of the fetch scripts to the terminal too."""
    progress = _progress()
    progress.say(" ".join(cmd))
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as child:
        for line in child.stdout:
            sys.stderr.write(line)
            step = _STEP.match(line.strip())
            if step:
                what = step.group(3)
                progress.say(f"[{step.group(1)}/{step.group(2)}] {what if len(what) <= 90 else what[:87] + '...'}")
            elif line.startswith(("fetch-onnxruntime:", "fetch-web-assets:", "CMake Error", "FAILED:", "ninja: build stopped")):
                progress.say(line.rstrip())
    if child.returncode != 0:
        progress.say(f"failed (exit {child.returncode}): {' '.join(cmd)}; `pip install -v .` shows every line")
        raise subprocess.CalledProcessError(child.returncode, cmd)


def _pybind11_args():
    try:
        import pybind11  # the pip package on machines without Debian's python3-pybind11
        return [f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"]
    except ImportError:
        return []


def _configured_elsewhere(build):
    """Where the build tree `build` was configured, as "SOURCE (build tree BUILD)", when that is not this
    checkout and this folder (a copied or moved tree), else None. CMake refuses such a CMakeCache.txt, and
    its build.ninja still runs its steps in the original tree: building it would build the original."""
    cache = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt"), errors="replace") as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                if sep and name.split(":")[0] in ("CMAKE_HOME_DIRECTORY", "CMAKE_CACHEFILE_DIR"):
                    cache[name.split(":")[0]] = value
    except OSError:
        return None
    source, where = cache.get("CMAKE_HOME_DIRECTORY", ""), cache.get("CMAKE_CACHEFILE_DIR", "")

    def same(a, b):
        return bool(a) and os.path.realpath(a) == os.path.realpath(b)

    if same(source, ROOT) and same(where, build):
        return None
    return f"{source or '?'} (build tree {where or '?'})"


@functools.lru_cache(maxsize=None)
def _own_build_dir():
    """The build tree this checkout builds the package in: build/release, unless its CMakeCache.txt was
    configured for another tree (build/release copied with the checkout): then build/pip-release, a
    folder of this checkout's own, which the next `pip install .` reuses."""
    release = os.path.join(ROOT, "build", "release")
    elsewhere = _configured_elsewhere(release)
    if elsewhere is None:
        return release
    own = os.path.join(ROOT, "build", "pip-release")
    _progress().say(f"{release} was configured for {elsewhere}, not for this checkout (a copied tree): CMake will not build "
                    f"it here, so this checkout builds in {own}")
    return own


def _built_tree():
    """The build tree to pack, or None: ORTFLEET_BUILD_DIR, else this checkout's own (build/release), with
    this Python's extension."""
    named = os.environ.get("ORTFLEET_BUILD_DIR")
    build = os.path.abspath(named) if named else _own_build_dir()
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        if named:
            sys.exit(f"ortfleet build: ORTFLEET_BUILD_DIR={named} is not a CMake build tree of ortfleet")
        return None
    if named and (elsewhere := _configured_elsewhere(build)) is not None:
        sys.exit(f"ortfleet build: ORTFLEET_BUILD_DIR={named} was configured for {elsewhere} (a copied or moved tree): "
                 "CMake builds it only there. Unset ORTFLEET_BUILD_DIR to build this checkout in a folder of its own")
    extension = os.path.join(build, "python", NAME, f"_ortfleet{sysconfig.get_config_var('EXT_SUFFIX')}")
    if not os.path.exists(extension):
        others = [n for n in os.listdir(os.path.join(build, "python", NAME)) if n.startswith("_ortfleet")] \
            if os.path.isdir(os.path.join(build, "python", NAME)) else []
        why = (f"it holds {', '.join(others)}, built for another Python than {sys.executable}" if others
               else "it holds no Python extension (configure it with -DORTFLEET_BUILD_PYTHON=ON)")
        if named:
            sys.exit(f"ortfleet build: cannot use ORTFLEET_BUILD_DIR={named}: {why}")
        _progress().say(f"not packing {build} as it is: {why}")
        return None
    return build


def _package_dir(tmp):
    """A folder holding the built package (ortfleet/ with the extension, bin/ and anchors/)."""
    build = _built_tree()
    if build:
        _run(["cmake", "--build", build, "--target", "ortfleet_python"])  # up to date: nothing to do
        return os.path.join(build, "python")
    python = [f"-DPython_EXECUTABLE={sys.executable}", *_pybind11_args()]
    prefix = os.environ.get("ORTFLEET_PREFIX")
    if prefix:
        out = os.path.join(tmp, "build")
        _run(["cmake", "-S", os.path.join(ROOT, "python"), "-B", out, "-DCMAKE_BUILD_TYPE=Release",
              f"-Dortfleet_DIR={prefix}/lib/cmake/ortfleet", f"-DORTFLEET_BIN_DIR={prefix}/bin", *python])
        _run(["cmake", "--build", out, "-j", str(os.cpu_count() or 2)])
        return os.path.join(out, "python")
    # The set-up's own build tree, so that what this builds is reused by the next `pip install .` and
    # by scripts/bootstrap.sh: the preset "release" (batches of sources), only what the package needs
    # (the tests are built by scripts/test.sh, not here).
    out = _own_build_dir()
    _progress().say(f"no built tree for {sys.executable}: building the C++ side into {out} "
                    "(5 to 10 minutes on 2 cores; ONNX Runtime and ECharts are fetched from npm if missing)")
    if not os.path.exists(os.path.join(ROOT, ".deps", "onnxruntime", "include")):
        _run([os.path.join(ROOT, "scripts", "fetch-onnxruntime.sh")])
    if not os.path.exists(os.path.join(ROOT, ".deps", "web", "echarts.min.js")):
        _run([os.path.join(ROOT, "scripts", "fetch-web-assets.sh")])
    _run(["cmake", "--preset", "release", "-S", ROOT, "-B", out, *python])
    _run(["cmake", "--build", out, "--target", "ortfleet_python"])
    return os.path.join(out, "python")


def _runtime_files(package):
    """The ONNX Runtime files the built package loads, as {name in the wheel: path}.

    Its own command line says which runtime it loads (with the user's ORTFLEET_ORT_LIB, if set); the
    core and the libonnxruntime_providers_* libraries beside it are carried, each file once.
    """
    exe = os.path.join(package, "bin", "ortfleet")
    doctor = subprocess.run([exe, "doctor", "--no-register", "--json"], capture_output=True, text=True)
    try:
        runtime = json.loads(doctor.stdout)["runtime"]
    except (ValueError, KeyError):
        runtime = {}
    core = runtime.get("path") if runtime.get("loaded") else None
    if not core:
        print("ortfleet build: warning: the built ortfleet finds no ONNX Runtime, so the package carries none; it will "
              "need ort_library=PATH, ORTFLEET_ORT_LIB or an onnxruntime package (run scripts/fetch-onnxruntime.sh first "
              "to carry one)", file=sys.stderr)
        return {}
    folder = os.path.dirname(core)
    files = {os.path.basename(core): core}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith("libonnxruntime_providers_") and name.endswith(".so") and not os.path.islink(path):
            files[name] = path
    print(f"ortfleet build: carrying ONNX Runtime {runtime.get('version')} from {folder}: {', '.join(files)}", file=sys.stderr)
    return {f"{NAME}/lib/onnxruntime/{name}": path for name, path in files.items()}


def _tag():
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{impl}-{impl}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def _launcher():
    """`ortfleet` on the PATH of the environment the package is installed into: a shell script that execs
    the command line the package carries, ortfleet/bin/ortfleet. Not a console script, whose Python
    wrapper cost every call ~45 ms before the program started (the warm pool's next job: 10-20 ms).

    pip installs it into the scripts folder as it is; the package lies in the platform library folder,
    wherever the scheme pip installs with puts them: the script tries each scheme's way from the one to
    the other (a venv, --user, --prefix, Debian's /usr/local and /usr, --target: ..), then asks Python.
    """
    ways = []
    for scheme in sysconfig.get_scheme_names():
        if scheme.startswith(("nt", "osx")):
            continue
        paths = sysconfig.get_paths(scheme)
        way = os.path.relpath(paths["platlib"], paths["scripts"])
        if way not in ways:
            ways.append(way)
    ways.append("..")  # pip install --target DIR: DIR/bin and DIR/ortfleet
    python = sys.executable if os.path.isabs(sys.executable) else "python3"
    tries = "".join(f'try "$here/{way}/ortfleet/bin/ortfleet" "$@"\n' for way in ways)
    return ("#!/bin/sh\n"
            "# ortfleet's command line as pip installed it: the program inside the ortfleet package, started with no\n"
            "# Python interpreter in between (ortfleet/__main__.py does the same for `python -m ortfleet`). Written by\n"
            "# python/build_backend/ortfleet_build.py with the ways from this folder to the package's.\n"
            'try() { if [ -x "$1" ]; then p=$1; shift; exec "$p" "$@"; fi; }\n'
            'case $0 in */*) here=${0%/*} ;; *) here=. ;; esac\n'
            f"{tries}"
            "# Reached through a link: the same ways from the folder of the file it links to.\n"
            'if [ -L "$0" ]; then\n'
            '  here=$(dirname -- "$(readlink -f -- "$0")")\n'
            f"  {tries.replace(chr(10), chr(10) + '  ').rstrip()}\n"
            "fi\n"
            f'exec {shlex.quote(python)} -m ortfleet "$@"\n')


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: ONNX Runtime sessions started fast on every GPU of a node, and why start-up is slow\n"
            "Requires-Python: >=3.10\nRequires-Dist: numpy\n")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, f"{NAME}-{VERSION}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(_metadata())
    return os.path.basename(info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(_package_dir(tmp), NAME)
        wheel_name = f"{NAME}-{VERSION}-{_tag()}.whl"
        info = f"{NAME}-{VERSION}.dist-info"
        records = []
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as whl:
            def add(arcname, data, executable=False):
                entry = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
                entry.external_attr = (0o100755 if executable else 0o100644) << 16  # a regular file, and its mode
                entry.compress_type = zipfile.ZIP_DEFLATED
                whl.writestr(entry, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                records.append(f"{arcname},sha256={digest},{len(data)}")

            packed = {}
            for folder, _, files in os.walk(source):
                for name in sorted(files):
                    path = os.path.join(folder, name)
                    # A wheel holds no links: one would be packed as a second copy of its file (the
                    # runtime's libonnxruntime.so -> .so.1 -> .so.1.29.0, 28 MB each); the installed
                    # package finds the core by its versioned name.
                    if name.endswith(".pyc") or os.path.islink(path):
                        continue
                    packed[os.path.join(NAME, os.path.relpath(path, source))] = path
            packed.update(_runtime_files(source))
            for arcname, path in packed.items():
                with open(path, "rb") as f:
                    add(arcname, f.read(), executable=os.access(path, os.X_OK) and not path.endswith(".py"))
            add(f"{NAME}-{VERSION}.data/scripts/ortfleet", _launcher().encode(), executable=True)
            add(f"{info}/METADATA", _metadata().encode())
            add(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: ortfleet_build\nRoot-Is-Purelib: false\nTag: {_tag()}\n".encode())
            whl.writestr(f"{info}/RECORD", "\n".join(records + [f"{info}/RECORD,,"]) + "\n")
    _progress().say(f"packed {wheel_name} ({len(packed)} files)")
    _progress().done()
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("ortfleet is installed from a checkout: pip install .")
