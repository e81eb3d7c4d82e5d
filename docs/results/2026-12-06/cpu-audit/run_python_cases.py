import subprocess, sys, os, re, time, signal
sys.path.insert(0, "/tmp/aud/py"); from cases import CASES, pre
only = sys.argv[1:]
for name, code in CASES.items():
    if only and not any(o in name for o in only): continue
    cmd = f"/tmp/aud/h.py py-{name} {subprocess.list2cmdline(['python3','-c', pre+code])} --timeout 90 --show 500"
    r = subprocess.run(["/tmp/aud/h.py", f"py-{name}", "python3 /tmp/aud/py/one.py " + name, "--timeout", "90", "--show", "600"], capture_output=True, text=True)
    print(r.stdout.rstrip())
