#!/usr/bin/env python3
"""What the venv's `ortfleet` costs on top of the native binary, on the call that matters most: a start
whose model the warm pool already holds (issue 59).

Installs the checkout into a fresh venv (`pip install --no-deps`, packing BUILD: seconds), leaves a
warm pool holding MODEL on the CPU (the first start leaves one), then times `ortfleet start MODEL` from
outside, exec to exit, ROUNDS times each way, interleaved, each way first in turn:
  native     BUILD/bin/ortfleet
  venv       the venv's bin/ortfleet, as pip installed it
  python     what pip installed before: a Python console script that imports ortfleet.__main__ and
             execs the package's binary (written here as pip wrote it)
Prints each way's median and spread, and the venv's and the console script's cost over the native
binary: the difference of the medians, and the median of each round's difference. Every start must say it found the model resident; the pool is stopped at the end.

Usage: bench/venv_launcher.py BUILD MODEL [ROUNDS]   (run it with /usr/bin/python3)
"""
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    build = pathlib.Path(sys.argv[1]).resolve()
    model = pathlib.Path(sys.argv[2]).resolve()
    rounds = int(sys.argv[3]) if len(sys.argv) == 4 else 10
    with tempfile.TemporaryDirectory(prefix="ortfleet-venv-launcher-") as tmp:
        tmp = pathlib.Path(tmp)
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(ROOT)], check=True,
                       env={**os.environ, "PIP_NO_INDEX": "1", "ORTFLEET_BUILD_DIR": str(build)})
        console = tmp / "ortfleet-console-script"  # pip's console script for ortfleet = ortfleet.__main__:main
        console.write_text(f"#!{venv / 'bin' / 'python'}\nimport re\nimport sys\nfrom ortfleet.__main__ import main\n"
                           "if __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                           "    sys.exit(main())\n")
        console.chmod(0o755)
        ways = {"native": str(build / "bin" / "ortfleet"), "venv": str(venv / "bin" / "ortfleet"), "python": str(console)}
        env = {**os.environ, "ORTFLEET_CACHE": str(tmp / "cache"), "XDG_RUNTIME_DIR": str(tmp / "run")}
        env.pop("ORTFLEET_AUTO_POOL", None)
        (tmp / "run").mkdir(mode=0o700)
        first = subprocess.run([ways["native"], "start", str(model), "--devices", "cpu"], env=env, capture_output=True, text=True)
        if first.returncode != 0 or "left a warm pool" not in first.stdout + first.stderr:
            sys.exit(f"the first start left no warm pool: {first.stdout}{first.stderr}")
        times = {way: [] for way in ways}
        try:
            for r in range(rounds):
                order = list(ways)[r % len(ways):] + list(ways)[:r % len(ways)]
                for way in order:
                    start = time.perf_counter()
                    run = subprocess.run([ways[way], "start", str(model), "--devices", "cpu", "--json"], env=env, capture_output=True, text=True)
                    times[way].append((time.perf_counter() - start) * 1e3)
                    if run.returncode != 0 or '"resident": true' not in run.stdout:
                        sys.exit(f"{way}: the start did not find the model resident (exit {run.returncode}): {run.stderr}")
        finally:
            subprocess.run([ways["native"], "-q", "pool", "stop"], env=env, capture_output=True)
    load = os.getloadavg()
    print(f"ortfleet start of a resident model (a warm pool on the CPU), exec to exit, {rounds} rounds interleaved; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'way':<8} {'median':>9} {'min':>9} {'max':>9}  command")
    for way, ms in times.items():
        print(f"{way:<8} {statistics.median(ms):>6.1f} ms {min(ms):>6.1f} ms {max(ms):>6.1f} ms  {ways[way]}")
    native = statistics.median(times["native"])
    for way in ("venv", "python"):
        # Also each round's difference (the two ran back to back), whose median the machine's load moves less.
        paired = statistics.median(w - n for w, n in zip(times[way], times["native"]))
        print(f"{way} - native: {statistics.median(times[way]) - native:+.1f} ms between the medians of {rounds}, "
              f"{paired:+.1f} ms the median of the rounds' differences")


if __name__ == "__main__":
    main()
