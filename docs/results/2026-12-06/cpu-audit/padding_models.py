"""Two models whose outputs depend on padded positions only through a min or a max over them (issue 58 audit, W1):
minmax.onnx: (x - min) / (max - min) over H and W of x [1, 3, H, W]; submax.onnx: x - max over S of x [1, S, 8].
Written as ONNX protobuf by hand (no onnx package here): python3 padding_models.py [FOLDER]"""
import struct, sys, os
def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def key(f, w): return varint((f << 3) | w)
def fv(f, n): return key(f, 0) + varint(n)
def fb(f, b): b = b.encode() if isinstance(b, str) else b; return key(f, 2) + varint(len(b)) + b
def ff(f, x): return key(f, 5) + struct.pack("<f", x)
def dim(d): return fb(1, fv(1, d) if isinstance(d, int) else fb(2, d))
def vinfo(name, shape, elem=1): return fb(1, name) + fb(2, fb(1, fv(1, elem) + fb(2, b"".join(dim(d) for d in shape))))
def attr_ints(name, vals): return fb(1, name) + fv(20, 7) + b"".join(fv(8, v) for v in vals)
def attr_int(name, v): return fb(1, name) + fv(20, 2) + fv(3, v)
def node(op, ins, outs, name, attrs=()):
    return b"".join(fb(1, i) for i in ins) + b"".join(fb(2, o) for o in outs) + fb(3, name) + fb(4, op) + b"".join(fb(5, a) for a in attrs)
def tensor(name, dims, vals):
    return b"".join(fv(1, d) for d in dims) + fv(2, 1) + fb(8, name) + fb(9, struct.pack("<%df" % len(vals), *vals))
def model(nodes, inits, inputs, outputs, opset=13):
    g = b"".join(fb(1, n) for n in nodes) + fb(2, "g") + b"".join(fb(5, t) for t in inits) + b"".join(fb(11, i) for i in inputs) + b"".join(fb(12, o) for o in outputs)
    return fv(1, 8) + fb(2, "audit") + fb(7, g) + fb(8, fb(1, "") + fv(2, opset))
out = sys.argv[1] if len(sys.argv) > 1 else "."

# min-max normalisation over the image: (x - min) / (max - min + eps), x [1, 3, H, W]
nodes = [node("ReduceMin", ["x"], ["mn"], "mn", [attr_ints("axes", [2, 3]), attr_int("keepdims", 1)]),
         node("ReduceMax", ["x"], ["mx"], "mx", [attr_ints("axes", [2, 3]), attr_int("keepdims", 1)]),
         node("Sub", ["x", "mn"], ["a"], "a"), node("Sub", ["mx", "mn"], ["r"], "r"), node("Add", ["r", "eps"], ["r2"], "r2"),
         node("Div", ["a", "r2"], ["y"], "y")]
open(os.path.join(out, "minmax.onnx"), "wb").write(model(nodes, [tensor("eps", [], [1e-6])], [vinfo("x", [1, 3, "H", "W"])], [vinfo("y", [1, 3, "H", "W"])]))
# x - max over the sequence: [1, S, 8]
nodes = [node("ReduceMax", ["x"], ["mx"], "mx", [attr_ints("axes", [1]), attr_int("keepdims", 1)]), node("Sub", ["x", "mx"], ["y"], "y")]
open(os.path.join(out, "submax.onnx"), "wb").write(model(nodes, [], [vinfo("x", [1, "S", 8])], [vinfo("y", [1, "S", 8])]))
