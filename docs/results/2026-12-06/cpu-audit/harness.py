#!/usr/bin/python3
"""Audit harness: run one case, report signals, timeouts, raw control bytes, C++/Python internals, leftovers."""
import os, sys, subprocess, time, re, json, argparse, shutil, signal, pwd
ap = argparse.ArgumentParser()
ap.add_argument("id"); ap.add_argument("cmd")
ap.add_argument("--timeout", type=float, default=120)
ap.add_argument("--user", default=None)
ap.add_argument("--env", action="append", default=[])
ap.add_argument("--keep-pool", action="store_true")
ap.add_argument("--sigint-after", type=float, default=None)
ap.add_argument("--sig", default="INT")
ap.add_argument("--stdin", default=None)
ap.add_argument("--show", type=int, default=1200)
a = ap.parse_args()
B = "/work/wt/audit/build/release"
root = f"/tmp/aud/cases/{a.id}"
shutil.rmtree(root, ignore_errors=True)
tmp = f"{root}/tmp"; os.makedirs(tmp)
xdg = f"{root}/xdg"; os.makedirs(xdg, mode=0o700)
env = {k: v for k, v in os.environ.items() if not k.startswith("ORTFLEET_")}
env.update(TMPDIR=tmp, XDG_RUNTIME_DIR=xdg, AUDIT_MARK=a.id, PATH=f"{B}/bin:/usr/bin:/bin",
           ORTFLEET_CACHE=os.environ.get("AUD_CACHE", "/tmp/aud/cache"), ORTFLEET_AUTO_POOL="0",
           PYTHONPATH=f"{B}/python", HOME=os.environ.get("HOME", "/root"))
if a.keep_pool: env.pop("ORTFLEET_AUTO_POOL")
for kv in a.env:
    k, _, v = kv.partition("=")
    if v == "@UNSET": env.pop(k, None)
    else: env[k] = v
pre = None
if a.user:
    pw = pwd.getpwnam(a.user)
    for d in (root, tmp, xdg): os.chown(d, pw.pw_uid, pw.pw_gid)
    env["HOME"] = pw.pw_dir; env["ORTFLEET_CACHE"] = f"{pw.pw_dir}/.cache/ortfleet"
    def pre():
        os.setgid(pw.pw_gid); os.initgroups(a.user, pw.pw_gid); os.setuid(pw.pw_uid)
t0 = time.monotonic()
p = subprocess.Popen(["/bin/bash", "-c", a.cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     stdin=subprocess.PIPE if a.stdin is not None else subprocess.DEVNULL,
                     env=env, cwd=root, preexec_fn=pre, start_new_session=True)
timed_out = False
if a.sigint_after is not None:
    try:
        p.wait(timeout=a.sigint_after)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, getattr(signal, "SIG" + a.sig))
try:
    out, err = p.communicate(input=a.stdin.encode() if a.stdin else None, timeout=a.timeout)
except subprocess.TimeoutExpired:
    timed_out = True
    os.killpg(p.pid, signal.SIGKILL)
    out, err = p.communicate()
dt = time.monotonic() - t0
rc = p.returncode
flags = []
if timed_out: flags.append("HANG?")
if rc is not None and (rc < 0 or rc > 128): flags.append(f"SIGNAL?rc={rc}")
ctl = re.compile(rb"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")
for name, data in (("stdout", out), ("stderr", err)):
    m = ctl.search(data)
    if m: flags.append(f"CTRL-in-{name}@{m.start()}:{data[max(0,m.start()-20):m.start()+20]!r}")
bad = re.compile(rb"terminate called|what\(\)|Traceback|std::|basic_string|\bstoll\b|\bstod\b|\bstoi\b|nlohmann|json\.exception|Segmentation|core dumped|Aborted")
for name, data in (("stdout", out), ("stderr", err)):
    m = bad.search(data)
    if m: flags.append(f"INTERNAL-in-{name}:{m.group().decode(errors='replace')}")
time.sleep(0.3)
left = []
for pid in os.listdir("/proc"):
    if not pid.isdigit(): continue
    try:
        e = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except Exception: continue
    if f"AUDIT_MARK={a.id}".encode() in e:
        try: cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")[:150]
        except Exception: cmd = b"?"
        left.append(f"{pid}:{cmd.decode(errors='replace')}")
if left: flags.append("LEFT-PROC:" + " | ".join(left))
files = []
for dp, dn, fn in os.walk(tmp):
    for n in dn + fn: files.append(os.path.relpath(os.path.join(dp, n), tmp))
if files: flags.append("LEFT-TMP:" + ",".join(files[:10]))
print(f"=== {a.id} rc={rc} {dt:.2f}s {' '.join(flags) if flags else 'clean'}")
s = a.show
if out: print("--- out:", out.decode(errors="replace")[-s:].rstrip())
if err: print("--- err:", err.decode(errors="replace")[-s:].rstrip())
if not a.keep_pool:
    for l in left:
        try: os.kill(int(l.split(":")[0]), signal.SIGKILL)
        except Exception: pass
