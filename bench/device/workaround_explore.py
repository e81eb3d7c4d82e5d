#!/usr/bin/env python3
"""Which rewrites of the crashing corpus models run on ONNX Runtime's CUDA EP (issue 26, item 3)?

Standalone; runs on the GPU machine (Python 3.12, onnx, numpy, onnxruntime 1.30 CPU build that loads
the 1.29 CUDA provider through register_execution_provider_library). Here (no onnxruntime) it can
build every variant model with --build-only.

  python3 workaround_explore.py --models DIR --out DIR [--work DIR] [--stage probes,nodes,full]
                                [--only isnet_quint8,...] [--runs 10] [--cpu-runs 5] [--timeout 120]
                                [--ortfleet BIN] [--build-only]

The root cause it tests (see the notes at the end of this docstring): the CUDA provider library is
a provider-bridge library compiled with USE_CUDA; the ONNX Runtime core that loads it is a CPU
build (no USE_CUDA / USE_CUDA_PROVIDER_INTERFACE). The two see different layouts of the
`ProviderHostCPU` vtable (core/providers/cpu/cpu_provider_shared.h): the core's
ProviderHostCPUImpl has 4 entries (GatherBase, UnsqueezeBase, 2 x NonMaxSuppressionBase), the
provider calls up to ~40 (Size, ScatterND, PadBase, SplitBase, ConcatBase, GatherElements, CumSum,
Tile, RoiAlign, OneHot, SliceBase, Einsum, If, Loop, Scan, UpsampleBase::AdjustOutputSizeAsPolicy,
contrib attention/beam search...). A CUDA kernel that calls one of those jumps through memory past
the end of the vtable: null (SIGSEGV at 0), a typeinfo (SIGSEGV, not executable) or an unrelated
function (garbage status / memory corruption).

What it does, each CUDA try in a fresh subprocess (crash -> its signal and phase; timeout):
  probes  one-op models (Add, Gather, Unsqueeze: should run; Concat, Slice, Split, Pad, Tile,
          Resize with sizes, If, ...: bridged) on CUDA, compared with the CPU EP;
  nodes   single-node models of the located node (/stage1/Resize of isnet_quint8 with its real
          input computed on the CPU EP; p2o.Slice.4 of ppocrv4_rec) in every variant (constant
          sizes, runtime sizes, constant scales, runtime scales, opsets 11/13/18/19, Gather for
          Slice, the node pinned to the CPU EP);
  full    the whole model in each variant (original, sizes_const, scales_const, fold_all_shapes,
          slice_const, slice_to_gather, pinning with session.name_based_layer_assignment, the
          split into CUDA/CPU sessions for isnet_quint8), compared with the original on the CPU EP,
          timed (p50 of --runs), with the count of nodes each EP ran (from ORT's profile).
Writes OUT/workaround_results.json (after every try) and OUT/workaround_summary.txt.
"""

import argparse
import copy
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np

try:
    import onnx
    from onnx import helper, numpy_helper, shape_inference, TensorProto
except ImportError:  # the worker on a machine without onnx still works
    onnx = None

HERE = os.path.abspath(__file__)

# CUDA kernels that call ProviderHostCPU beyond its 4th entry (cpu_provider_shared.h, newest layout).
BRIDGED_OPS = {
    "Size", "ScatterND", "Pad", "Split", "Concat", "GatherElements", "CumSum", "Tile", "RoiAlign",
    "OneHot", "Slice", "Einsum", "If", "Loop", "Scan", "Resize", "Upsample",
    # com.microsoft kernels with bridged checks
    "EmbedLayerNormalization", "QEmbedLayerNormalization", "BiasGelu", "Attention",
    "LongformerAttention", "BeamSearch", "WhisperBeamSearch", "GreedySearch", "Sampling",
}

# Pure ops a shape-only computation is made of (folded when all inputs are known).
FOLD_OPS = {
    "Shape", "Size", "Constant", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze", "Cast", "Add",
    "Sub", "Mul", "Div", "Floor", "Ceil", "Reshape", "Identity", "ConstantOfShape", "Range", "Equal",
    "Where", "Not", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Sqrt", "Pow", "Neg", "Abs",
    "ReduceProd", "Max", "Min", "Expand", "Transpose", "And", "Or",
}

MODEL_SPECS = {
    # name: shapes for dynamic inputs, fixed input values, inputs frozen as constants, the node the
    # crash was located at, whether to build the split variants, tolerance
    "isnet_quint8": {"focus": "/stage1/Resize", "split": True, "rtol": 1e-2},
    "isnet_fp16": {"focus": None, "rtol": 2e-2},
    "ppocrv4_rec": {"shapes": {"x": [1, 3, 48, 320]}, "focus": "p2o.Slice.4", "rtol": 1e-3},
    # optional controls, used when present in --models
    "ppocrv4_det": {"shapes": {"x": [1, 3, 640, 640]}, "optional": True, "rtol": 1e-3},
    "oww_hey_jarvis": {"optional": True, "rtol": 1e-3},
    "silero_vad_v4": {"shapes": {"input": [1, 1536], "h": [2, 1, 64], "c": [2, 1, 64]},
                      "values": {"sr": 16000, "h": 0.0, "c": 0.0}, "freeze": ["sr"],
                      "optional": True, "rtol": 1e-3},
}
REQUIRED_MODELS = ["isnet_quint8", "isnet_fp16", "ppocrv4_rec"]

NP_OF_ONNX = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
              7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# The worker: one try, in its own process.
# --------------------------------------------------------------------------------------------

def phase(name):
    print("@@phase " + name, flush=True)


def parse_profile(path, watch):
    with open(path) as f:
        events = json.load(f)
    per_ep, ops, seen, watched = {}, {}, set(), {}
    for e in events:
        if e.get("cat") != "Node":
            continue
        args = e.get("args") or {}
        ep = args.get("provider")
        name = e.get("name", "")
        if not ep or not name.endswith("_kernel_time"):
            continue
        node = name[: -len("_kernel_time")]
        if node in seen:
            continue
        seen.add(node)
        per_ep[ep] = per_ep.get(ep, 0) + 1
        key = ep + ":" + args.get("op_name", "?")
        ops[key] = ops.get(key, 0) + 1
        if node in watch:
            watched[node] = ep
    return {"nodes_per_ep": per_ep, "ops_per_ep": ops, "watched": watched}


def worker_main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    res = {"ok": False}
    out_json = job["result"]

    def dump():
        with open(out_json + ".tmp", "w") as f:
            json.dump(res, f)
        os.replace(out_json + ".tmp", out_json)

    try:
        phase("import")
        import onnxruntime as ort
        res["ort_version"] = ort.__version__
        devs = None
        if any(s["ep"] == "cuda" for s in job["stages"]):
            lib = job.get("cuda_ep") or os.environ.get("ORTFLEET_CUDA_EP")
            if not lib:
                raise RuntimeError("no CUDA EP library: set ORTFLEET_CUDA_EP or pass --cuda-ep")
            phase("register")
            ort.register_execution_provider_library("CUDA", lib)
            devs = [d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider"]
            if not devs:
                raise RuntimeError("the CUDA EP library registered but lists no device")
        sessions, create_s = [], []
        for i, st in enumerate(job["stages"]):
            so = ort.SessionOptions()
            so.log_severity_level = 3
            for k, v in (st.get("config") or {}).items():
                so.add_session_config_entry(k, str(v))
            if st.get("profile"):
                so.enable_profiling = True
                so.profile_file_prefix = os.path.join(job["workdir"], "prof_%d_%d" % (os.getpid(), i))
            phase("create %d/%d %s" % (i + 1, len(job["stages"]), st["ep"]))
            t = time.perf_counter()
            if st["ep"] == "cuda":
                so.add_provider_for_devices(devs[:1], st.get("ep_options") or {})
                s = ort.InferenceSession(st["model"], sess_options=so)
            else:
                s = ort.InferenceSession(st["model"], sess_options=so, providers=["CPUExecutionProvider"])
            create_s.append(time.perf_counter() - t)
            sessions.append(s)
        res["create_s"] = create_s
        npz = np.load(job["inputs"])
        feeds = {k: npz[k] for k in npz.files}
        in_names = [[i.name for i in s.get_inputs()] for s in sessions]
        out_names = [[o.name for o in s.get_outputs()] for s in sessions]

        def run_once():
            vals = dict(feeds)
            for s, ins, outs in zip(sessions, in_names, out_names):
                missing = [n for n in ins if n not in vals]
                if missing:
                    raise RuntimeError("no value for input(s) %s" % missing)
                got = s.run(outs, {n: vals[n] for n in ins})
                vals.update(zip(outs, got))
            return vals

        phase("run 1")
        t = time.perf_counter()
        vals = run_once()
        res["first_run_ms"] = (time.perf_counter() - t) * 1e3
        profiles = []
        for s, st in zip(sessions, job["stages"]):
            if st.get("profile"):
                p = s.end_profiling()
                try:
                    profiles.append(parse_profile(p, set(job.get("watch") or [])))
                finally:
                    try:
                        os.remove(p)
                    except OSError:
                        pass
        if profiles:
            merged = {"nodes_per_ep": {}, "ops_per_ep": {}, "watched": {}}
            for p in profiles:
                for k in ("nodes_per_ep", "ops_per_ep"):
                    for a, b in p[k].items():
                        merged[k][a] = merged[k].get(a, 0) + b
                merged["watched"].update(p["watched"])
            res["profile"] = merged
        save = job.get("save") or out_names[-1]
        missing = [n for n in save if n not in vals]
        if missing:
            raise RuntimeError("outputs not produced: %s" % missing)
        if job.get("outputs"):
            np.savez(job["outputs"], **{n: vals[n] for n in save})
        runs = []
        for r in range(int(job.get("runs", 0))):
            phase("timed run %d" % (r + 1))
            t = time.perf_counter()
            run_once()
            runs.append((time.perf_counter() - t) * 1e3)
        res["runs_ms"] = runs
        if runs:
            res["p50_ms"] = statistics.median(runs)
        res["ok"] = True
        phase("done")
    except Exception as e:  # an ORT error (not a crash): report it
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:1500])
        phase("error")
    dump()
    return 0


# --------------------------------------------------------------------------------------------
# The parent: running tries, comparing.
# --------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, args):
        self.args = args
        self.n = 0

    def run(self, stages, inputs, save=None, outputs=None, runs=0, watch=None, timeout=None, tag="try"):
        left = self.args.deadline - (time.monotonic() - self.args.t0)
        if left < 15:
            return {"status": "skipped (--deadline)", "phase": "-"}
        self.n += 1
        jobdir = os.path.join(self.args.work, "jobs")
        os.makedirs(jobdir, exist_ok=True)
        base = os.path.join(jobdir, "%04d_%s" % (self.n, tag.replace("/", "_")))
        job = {"stages": stages, "inputs": inputs, "save": save, "outputs": outputs, "runs": runs,
               "watch": watch or [], "result": base + ".result.json", "workdir": jobdir,
               "cuda_ep": self.args.cuda_ep}
        with open(base + ".job.json", "w") as f:
            json.dump(job, f)
        if os.path.exists(job["result"]):
            os.remove(job["result"])
        timeout = int(min(timeout or self.args.timeout, left - 5))
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, HERE, "--worker", base + ".job.json"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            out, _ = p.communicate()
        wall = time.perf_counter() - t
        text = out.decode(errors="replace")
        phases = [l[8:] for l in text.splitlines() if l.startswith("@@phase ")]
        tail = "\n".join(l for l in text.splitlines() if not l.startswith("@@phase "))[-1200:]
        r = {"wall_s": round(wall, 2), "phase": phases[-1] if phases else "start"}
        if os.path.exists(job["result"]):
            with open(job["result"]) as f:
                r.update(json.load(f))
        if timed_out:
            r["status"] = "timeout after %d s" % timeout
        elif p.returncode < 0:
            try:
                name = signal.Signals(-p.returncode).name
            except ValueError:
                name = "signal %d" % -p.returncode
            r["status"] = "crashed: %s in %s" % (name, r["phase"])
            r["signal"] = name
        elif r.get("ok"):
            r["status"] = "ran"
        elif "error" in r:
            r["status"] = "error in %s" % r["phase"]
        else:
            r["status"] = "exit %d in %s" % (p.returncode, r["phase"])
        if not r.get("ok"):
            r["output_tail"] = tail
        return r


def compare(ref_path, got_path, rtol):
    ref, got = np.load(ref_path), np.load(got_path)
    worst = {"max_abs": 0.0, "max_rel": 0.0}
    per = {}
    for k in ref.files:
        if k not in got.files:
            per[k] = "missing"
            worst["verdict"] = "MISMATCH"
            worst.setdefault("reason", "%s missing" % k)
            continue
        a, b = ref[k], got[k]
        if a.shape != b.shape:
            per[k] = "shape %s vs %s" % (list(a.shape), list(b.shape))
            worst["verdict"] = "MISMATCH"
            worst.setdefault("reason", "%s: %s" % (k, per[k]))
            continue
        if a.dtype == np.bool_ or b.dtype == np.bool_:
            d = float(np.count_nonzero(a != b))
            per[k] = {"differ": d}
            worst["max_abs"] = max(worst["max_abs"], d)
            continue
        a64, b64 = np.atleast_1d(a.astype(np.float64)), np.atleast_1d(b.astype(np.float64))
        nan = int(np.count_nonzero(np.isnan(b64) & ~np.isnan(a64)))
        diff = np.abs(a64 - b64)
        diff[np.isnan(a64) & np.isnan(b64)] = 0
        mx = float(np.nanmax(diff)) if diff.size else 0.0
        scale = float(np.nanmax(np.abs(a64))) if a64.size else 0.0
        rel = mx / scale if scale > 0 else (0.0 if mx == 0 else float("inf"))
        per[k] = {"max_abs": mx, "max_rel": rel, "new_nan": nan}
        worst["max_abs"] = max(worst["max_abs"], mx)
        worst["max_rel"] = max(worst["max_rel"], rel)
        if nan:
            worst["verdict"] = "MISMATCH"
            worst.setdefault("reason", "%s: %d new NaN" % (k, nan))
    if "verdict" not in worst:
        r = worst["max_rel"]
        worst["verdict"] = "match" if r <= rtol else ("close" if r <= 10 * rtol else "MISMATCH")
    worst["per_output"] = per
    return worst


# --------------------------------------------------------------------------------------------
# Graph helpers.
# --------------------------------------------------------------------------------------------

def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                yield g


def outer_refs(graph):
    """Names a (sub)graph reads from its enclosing scopes."""
    local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    refs = []
    for n in graph.node:
        for i in n.input:
            if i and i not in local and i not in refs:
                refs.append(i)
        for g in subgraphs(n):
            for i in outer_refs(g):
                if i not in local and i not in refs:
                    refs.append(i)
        local.update(o for o in n.output if o)
    return refs


def node_reads(node):
    names = [i for i in node.input if i]
    for g in subgraphs(node):
        names += [i for i in outer_refs(g) if i not in names]
    return names


def topo_sort(graph):
    """Stable topological order (the fp16 ISNet is not sorted)."""
    nodes = list(graph.node)
    producer = {}
    for idx, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = idx
    deps = [set(producer[i] for i in node_reads(n) if i in producer) for n in nodes]
    users = [[] for _ in nodes]
    for idx, d in enumerate(deps):
        for j in d:
            users[j].append(idx)
    pending = [len(d) for d in deps]
    import heapq
    ready = [i for i, c in enumerate(pending) if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        raise RuntimeError("the graph has a cycle")
    changed = order != list(range(len(nodes)))
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)
    return changed


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def fix_input_shapes(model, spec):
    """Sets every dynamic input dim: from the spec, else 1. Returns {name: shape}."""
    shapes = {}
    for i in graph_inputs(model):
        want = (spec.get("shapes") or {}).get(i.name)
        dims = i.type.tensor_type.shape.dim
        shape = []
        for k, d in enumerate(dims):
            v = want[k] if want else (d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1)
            shape.append(int(v))
        for k, d in enumerate(dims):
            d.ClearField("dim_param")
            d.dim_value = shape[k]
        shapes[i.name] = shape
    return shapes


class Types:
    """Element type and static shape of every tensor, from onnx shape inference."""

    def __init__(self, model):
        self.t = {}
        try:
            try:
                im = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
            except TypeError:
                im = shape_inference.infer_shapes(model)
            self.error = None
        except Exception as e:
            im, self.error = model, str(e)[:300]
        for v in list(im.graph.input) + list(im.graph.value_info) + list(im.graph.output):
            tt = v.type.tensor_type
            if not tt.elem_type:
                continue
            dims = None
            if tt.HasField("shape"):
                dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            self.t[v.name] = (tt.elem_type, dims)
        for i in model.graph.initializer:
            self.t[i.name] = (i.data_type, list(i.dims))

    def merge(self, other):
        """Takes other's static shapes where this one has none (other: the folded model)."""
        for k, v in other.t.items():
            if self.dims(k) is None and v[1] is not None and all(x is not None for x in v[1]):
                self.t[k] = v

    def elem(self, name):
        return self.t.get(name, (None, None))[0]

    def dims(self, name):
        d = self.t.get(name, (None, None))[1]
        return d if d is not None and all(x is not None for x in d) else None

    def value_info(self, name, with_shape=True):
        et, dims = self.t.get(name, (None, None))
        if et is None:
            return helper.make_empty_tensor_value_info(name)
        return helper.make_tensor_value_info(name, et, dims if with_shape else None)


def complete_outputs(m, types=None):
    """Gives every graph output an element type and, where known, a shape (the checker wants them)."""
    known = {}
    if types is not None:
        known.update({k: v for k, v in types.t.items()})
    try:
        im = shape_inference.infer_shapes(m)
        for v in list(im.graph.value_info) + list(im.graph.output):
            tt = v.type.tensor_type
            if tt.elem_type:
                dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] \
                    if tt.HasField("shape") else known.get(v.name, (None, None))[1]
                known[v.name] = (tt.elem_type, dims)
    except Exception:
        pass
    for o in m.graph.output:
        if o.name in known and known[o.name][0]:
            et, dims = known[o.name]
            o.CopyFrom(helper.make_tensor_value_info(o.name, et, dims))
    return m


def consumers(graph):
    c = {}
    for n in graph.node:
        for i in node_reads(n):
            c.setdefault(i, []).append(n)
    return c


def dead_code_eliminate(graph):
    needed = {o.name for o in graph.output}
    keep = []
    for n in reversed(list(graph.node)):
        if any(o in needed for o in n.output if o):
            keep.append(n)
            needed.update(node_reads(n))
    removed = len(graph.node) - len(keep)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    inits = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    return removed


def set_initializer(graph, name, value):
    for k, i in enumerate(graph.initializer):
        if i.name == name:
            graph.initializer[k].CopyFrom(numpy_helper.from_array(value, name))
            return
    graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))


def const_value(graph, name, consts=None):
    """The value of an initializer or Constant output, else None."""
    if consts is not None and name in consts:
        return consts[name]
    for i in graph.initializer:
        if i.name == name:
            return numpy_helper.to_array(i)
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return eval_constant(n)
    return None


def eval_constant(n):
    for a in n.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name == "value_float":
            return np.array(a.f, np.float32)
        if a.name == "value_floats":
            return np.array(list(a.floats), np.float32)
        if a.name == "value_int":
            return np.array(a.i, np.int64)
        if a.name == "value_ints":
            return np.array(list(a.ints), np.int64)
    raise ValueError("Constant %s: unsupported attribute" % n.name)


# --------------------------------------------------------------------------------------------
# A numpy evaluator for shape-only computations (used without onnxruntime; checked against the
# CPU EP on the GPU machine).
# --------------------------------------------------------------------------------------------

def slice_indices(dim, start, end, step):
    if step == 0:
        raise ValueError("Slice step 0")
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return list(range(start, end, step))


def slice_params(node, graph, opset, consts):
    """(starts, ends, axes, steps) of a Slice when they are constants, else None."""
    if opset < 10:
        starts, ends = attr(node, "starts"), attr(node, "ends")
        axes = attr(node, "axes") or list(range(len(starts)))
        return list(starts), list(ends), list(axes), [1] * len(starts)
    vals = []
    for k in range(1, 5):
        if k < len(node.input) and node.input[k]:
            v = const_value(graph, node.input[k], consts)
            if v is None:
                return None
            vals.append([int(x) for x in np.asarray(v).reshape(-1)])
        else:
            vals.append(None)
    starts, ends, axes, steps = vals
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    return starts, ends, axes, steps


def np_eval_node(n, ins, opset, types):
    op = n.op_type
    if op == "Constant":
        return [eval_constant(n)]
    if op in ("Shape", "Size"):
        raise KeyError("static shape needed")
    if op == "Gather":
        return [np.take(ins[0], ins[1].astype(np.int64), axis=attr(n, "axis", 0))]
    if op == "Slice":
        if opset < 10:
            starts, ends = attr(n, "starts"), attr(n, "ends")
            axes = attr(n, "axes") or list(range(len(starts)))
            steps = [1] * len(starts)
        else:
            starts, ends = [int(x) for x in ins[1]], [int(x) for x in ins[2]]
            axes = [int(x) for x in ins[3]] if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
            steps = [int(x) for x in ins[4]] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        x = ins[0]
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = a + x.ndim if a < 0 else a
            x = np.take(x, slice_indices(x.shape[a], s, e, st), axis=a)
        return [x]
    if op == "Concat":
        return [np.concatenate([np.atleast_1d(i) if i.ndim == 0 else i for i in ins], axis=attr(n, "axis", 0))]
    if op in ("Unsqueeze", "Squeeze"):
        axes = attr(n, "axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = [int(a) for a in ins[1]]
        x = ins[0]
        if op == "Squeeze":
            return [np.squeeze(x) if not axes else np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))]
        r = x.ndim + len(axes)
        for a in sorted(a + r if a < 0 else a for a in axes):
            x = np.expand_dims(x, a)
        return [x]
    if op == "Cast":
        return [ins[0].astype(NP_OF_ONNX[attr(n, "to")])]
    if op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Greater", "Less", "GreaterOrEqual",
              "LessOrEqual", "And", "Or"):
        a = ins[0]
        if op == "Div" and np.issubdtype(a.dtype, np.integer):
            return [np.trunc(ins[0] / ins[1]).astype(a.dtype)]
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
              "Equal": np.equal, "Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
              "LessOrEqual": np.less_equal, "And": np.logical_and, "Or": np.logical_or}
        if op in ("Max", "Min"):
            r = ins[0]
            for b in ins[1:]:
                r = (np.maximum if op == "Max" else np.minimum)(r, b)
            return [r]
        r = fn[op](ins[0], ins[1])
        return [r.astype(a.dtype) if op in ("Add", "Sub", "Mul", "Div", "Pow") else r]
    if op in ("Floor", "Ceil", "Sqrt", "Neg", "Abs", "Not", "Identity"):
        fn = {"Floor": np.floor, "Ceil": np.ceil, "Sqrt": np.sqrt, "Neg": np.negative, "Abs": np.abs,
              "Not": np.logical_not, "Identity": lambda x: x}[op]
        return [fn(ins[0])]
    if op == "Reshape":
        shape = [int(s) for s in ins[1]]
        if not attr(n, "allowzero", 0):
            shape = [ins[0].shape[k] if s == 0 else s for k, s in enumerate(shape)]
        return [ins[0].reshape(shape)]
    if op == "ConstantOfShape":
        v = attr(n, "value")
        v = numpy_helper.to_array(v) if v is not None else np.zeros(1, np.float32)
        return [np.full([int(s) for s in ins[0]], v.reshape(-1)[0], v.dtype)]
    if op == "Range":
        return [np.arange(ins[0], ins[1], ins[2]).astype(ins[0].dtype)]
    if op == "Where":
        return [np.where(ins[0], ins[1], ins[2])]
    if op == "ReduceProd":
        axes = attr(n, "axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = [int(a) for a in ins[1]]
        return [np.prod(ins[0], axis=tuple(axes) if axes else None, keepdims=bool(attr(n, "keepdims", 1)))]
    if op == "Expand":
        return [ins[0] * np.ones([int(s) for s in ins[1]], ins[0].dtype)]
    if op == "Transpose":
        return [np.transpose(ins[0], attr(n, "perm"))]
    raise KeyError("no numpy evaluation for " + op)


# --------------------------------------------------------------------------------------------
# Constant folding of shape-only computations.
# --------------------------------------------------------------------------------------------

def plan_fold(model, types, seeds=(), limit=1 << 16):
    """Nodes computable from shapes/constants only, and the tensors kept nodes read from them.
    seeds: initializers that count as shape-derived (frozen inputs, earlier folds)."""
    g = model.graph
    known = {i.name for i in g.initializer} | set(seeds)
    derived = set(seeds)  # depends on a shape, a Constant or a seed (not on weights only)
    fold = []
    for n in g.node:
        ins = [i for i in n.input if i]
        small = all((types.dims(o) is None) or int(np.prod(types.dims(o))) <= limit for o in n.output if o)
        ok = False
        if any(True for _ in subgraphs(n)):
            ok = False
        elif n.op_type == "Constant":
            ok = True
        elif n.op_type in ("Shape", "Size"):
            ok = types.dims(ins[0]) is not None
        elif n.op_type in FOLD_OPS and ins and all(i in known for i in ins) and any(i in derived for i in ins):
            ok = small
        if ok:
            fold.append(n)
            known.update(o for o in n.output if o)
            derived.update(o for o in n.output if o)
    folded = {o for n in fold for o in n.output if o}
    fold_ids = {id(n) for n in fold}
    boundary = []
    for n in g.node:
        if id(n) in fold_ids:
            continue
        for i in node_reads(n):
            if i in folded and i not in boundary:
                boundary.append(i)
    for o in g.output:
        if o.name in folded and o.name not in boundary:
            boundary.append(o.name)
    return fold, boundary


def iterative_fold(model, frozen, evaluate, max_iter=6):
    """Folds shape-only computations until nothing more folds (a folded Reshape shape makes more
    shapes static). evaluate(model, types, fold, boundary) -> {name: value}. Returns the folded
    model, the values of the tensors it turned into initializers, and the list of those names."""
    m = copy.deepcopy(model)
    if frozen:
        freeze_inputs(m, frozen)
    seeds, vals, log_ = set(frozen), {}, []
    for it in range(max_iter):
        t = Types(m)
        fold, boundary = plan_fold(m, t, seeds)
        real = [n for n in fold if n.op_type != "Constant" or n.output[0] in boundary]
        if not real:
            break
        v = evaluate(m, t, fold, boundary)
        missing = [b for b in boundary if b not in v]
        if missing:
            log_.append("iteration %d: no value for %d tensors (%s...)" % (it + 1, len(missing), missing[0]))
            boundary = [b for b in boundary if b in v]
            if not boundary:
                break
        apply_values(m, v, set(boundary))
        seeds |= set(boundary)
        vals.update({b: v[b] for b in boundary})
        log_.append("iteration %d: %d nodes folded, %d tensors" % (it + 1, len(fold), len(boundary)))
    alive = {i.name for i in m.graph.initializer}
    final = [k for k in vals if k in alive]
    return m, vals, final, log_


def np_eval_fold(model, types, fold, feeds):
    """Values of every folded tensor, by numpy. Raises KeyError on an unsupported op."""
    g = model.graph
    opset = default_opset(model)
    vals = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    vals.update(feeds)
    for n in fold:
        if n.op_type == "Shape":
            d = types.dims(n.input[0])
            s, e = attr(n, "start", 0), attr(n, "end", None)
            vals[n.output[0]] = np.array(d[s:e] if e is not None else d[s:], np.int64)
            continue
        if n.op_type == "Size":
            vals[n.output[0]] = np.array(int(np.prod(types.dims(n.input[0]))), np.int64)
            continue
        ins = [vals[i] if i else None for i in n.input]
        for o, v in zip(n.output, np_eval_node(n, ins, opset, types)):
            vals[o] = np.asarray(v)
    return vals


def apply_values(model, values, names):
    """Makes each named tensor an initializer with its value, then removes dead nodes."""
    g = model.graph
    produced = {o: n for n in g.node for o in n.output}
    kept = []
    for n in g.node:
        if any(o in names for o in n.output):
            # a node whose outputs are all replaced goes; one with other live outputs stays
            if all((o in names) or not o for o in n.output):
                continue
        kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    for name in names:
        if name in produced:
            set_initializer(g, name, values[name])
    return dead_code_eliminate(g)


def freeze_inputs(model, values):
    g = model.graph
    keep = [i for i in g.input if i.name not in values]
    del g.input[:]
    g.input.extend(keep)
    for k, v in values.items():
        set_initializer(g, k, v)


def inline_constant_ifs(model):
    """Replaces every top-level If whose condition is an initializer by the branch it takes."""
    g = model.graph
    inlined = []
    while True:
        target = None
        for n in g.node:
            if n.op_type == "If":
                c = const_value(g, n.input[0])
                if c is not None:
                    target = (n, bool(np.asarray(c).reshape(-1)[0]))
                    break
        if target is None:
            return inlined
        n, cond = target
        branch = attr(n, "then_branch" if cond else "else_branch")
        prefix = (n.name or "if") + "/inl/"
        local = {i.name for i in branch.initializer} | {o for m in branch.node for o in m.output if o}
        ren = {name: prefix + name for name in local}

        def rename_graph(sub):
            for m in sub.node:
                for k, i in enumerate(m.input):
                    if i in ren:
                        m.input[k] = ren[i]
                for sg in subgraphs(m):
                    rename_graph(sg)

        new_nodes = []
        for m in branch.node:
            m2 = copy.deepcopy(m)
            for k, i in enumerate(m2.input):
                if i in ren:
                    m2.input[k] = ren[i]
            for k, o in enumerate(m2.output):
                if o in ren:
                    m2.output[k] = ren[o]
            for sg in subgraphs(m2):
                rename_graph(sg)
            m2.name = prefix + (m.name or m.op_type)
            new_nodes.append(m2)
        for i in branch.initializer:
            t = copy.deepcopy(i)
            t.name = ren[i.name]
            g.initializer.append(t)
        for bo, o in zip(branch.output, n.output):
            if o:
                new_nodes.append(helper.make_node("Identity", [ren.get(bo.name, bo.name)], [o],
                                                  name=prefix + "out/" + o))
        idx = list(g.node).index(n)
        nodes = list(g.node)
        nodes[idx:idx + 1] = new_nodes
        del g.node[:]
        g.node.extend(nodes)
        inlined.append("%s -> %s branch (%d nodes)" % (n.name, "then" if cond else "else", len(branch.node)))


# --------------------------------------------------------------------------------------------
# Rewrites.
# --------------------------------------------------------------------------------------------

def resize_slots(opset):
    """Input indices of roi, scales, sizes for a Resize of this opset (10: X, scales)."""
    return (None, 1, None) if opset == 10 else (1, 2, 3)


def rewrite_resize_const(model, types, values, mode):
    """mode 'sizes': computed roi/scales/sizes -> initializers. mode 'scales': every Resize gets a
    constant float scales (out/in) and no sizes/roi."""
    g = model.graph
    opset = default_opset(model)
    notes, changed = [], 0
    for n in g.node:
        if n.op_type != "Resize":
            continue
        roi_i, scales_i, sizes_i = resize_slots(opset)
        ins = list(n.input) + [""] * (4 - len(n.input))
        if mode == "sizes":
            for k in (roi_i, scales_i, sizes_i):
                if k is None or not ins[k]:
                    continue
                if const_value(g, ins[k]) is not None:
                    continue
                if ins[k] not in values:
                    notes.append("%s: no value for %s" % (n.name, ins[k]))
                    continue
                new = ins[k] + "__const"
                set_initializer(g, new, np.asarray(values[ins[k]]))
                n.input[k] = new
                changed += 1
            continue
        # scales
        in_dims = types.dims(n.input[0])
        if in_dims is None and (n.input[0] + "__shape") in values:
            in_dims = [int(x) for x in values[n.input[0] + "__shape"]]
        if in_dims is None:
            notes.append("%s: input shape unknown" % n.name)
            continue
        out_dims = None
        if sizes_i is not None and ins[sizes_i]:
            v = const_value(g, ins[sizes_i], values)
            if v is not None:
                out_dims = [int(x) for x in np.asarray(v).reshape(-1)]
        scales = None
        if out_dims is None:
            v = const_value(g, ins[scales_i], values) if ins[scales_i] else None
            if v is None or np.asarray(v).size == 0:
                notes.append("%s: neither sizes nor scales known" % n.name)
                continue
            scales = np.asarray(v, np.float32).reshape(-1)
        else:
            if attr(n, "axes") is not None:
                notes.append("%s: has axes; skipped" % n.name)
                continue
            scales = np.array([o / i for o, i in zip(out_dims, in_dims)], np.float32)
            for k, (o, i) in enumerate(zip(out_dims, in_dims)):
                nudges = 0
                while int(np.float32(scales[k]) * np.float32(i)) < o and nudges < 8:
                    scales[k] = np.nextafter(scales[k], np.float32(np.inf))
                    nudges += 1
                if nudges:
                    notes.append("%s: scale %d nudged %d ulp so trunc(in*scale)=out" % (n.name, k, nudges))
        sname = (n.name or "resize") + "__scales"
        set_initializer(g, sname, scales)
        if opset == 10:
            new_inputs = [n.input[0], sname]
        elif opset < 13:
            rname = (n.name or "resize") + "__roi"
            set_initializer(g, rname, np.zeros(0, np.float32))
            new_inputs = [n.input[0], rname, sname]
        else:
            new_inputs = [n.input[0], "", sname]
        del n.input[:]
        n.input.extend(new_inputs)
        changed += 1
    removed = dead_code_eliminate(g)
    return changed, removed, notes


def rewrite_slice_const(model, values):
    """Slice (opset >= 10) starts/ends/axes/steps that are computed -> initializers."""
    g = model.graph
    if default_opset(model) < 10:
        return 0, 0, ["every Slice is opset < 10: starts/ends/axes are attributes already"]
    changed, notes = 0, []
    for n in g.node:
        if n.op_type != "Slice":
            continue
        for k in range(1, len(n.input)):
            name = n.input[k]
            if not name or const_value(g, name) is not None:
                continue
            if name not in values:
                notes.append("%s: no value for %s" % (n.name, name))
                continue
            set_initializer(g, name + "__const", np.asarray(values[name]))
            n.input[k] = name + "__const"
            changed += 1
    return changed, dead_code_eliminate(g), notes


def rewrite_slice_to_gather(model, types, values, only_data=True):
    """Every Slice with constant parameters and a static input shape -> a chain of Gathers with
    constant indices (GatherBase is one of the 4 bridge entries that exist)."""
    g = model.graph
    opset = default_opset(model)
    new_nodes, changed, notes = [], 0, []
    for n in g.node:
        if n.op_type != "Slice":
            new_nodes.append(n)
            continue
        dims = types.dims(n.input[0])
        et = types.elem(n.input[0])
        if only_data and et in (TensorProto.INT64, TensorProto.INT32) and dims is not None and len(dims) <= 1:
            new_nodes.append(n)  # a shape computation: it runs on the CPU EP anyway
            continue
        p = slice_params(n, g, opset, values)
        if p is None or dims is None:
            notes.append("%s: parameters or input shape not constant; kept" % n.name)
            new_nodes.append(n)
            continue
        starts, ends, axes, steps = p
        cur = n.input[0]
        shape = list(dims)
        for k, (s, e, a, st) in enumerate(zip(starts, ends, axes, steps)):
            a = a + len(shape) if a < 0 else a
            idx = slice_indices(shape[a], s, e, st)
            if idx == list(range(shape[a])):
                continue
            iname = "%s__gather%d_idx" % (n.name, k)
            set_initializer(g, iname, np.array(idx, np.int64))
            out = "%s__gather%d" % (n.name, k)
            new_nodes.append(helper.make_node("Gather", [cur, iname], [out], name="%s__gather%d" % (n.name, k), axis=a))
            cur = out
            shape[a] = len(idx)
        new_nodes.append(helper.make_node("Identity", [cur], [n.output[0]], name=n.name + "__id"))
        changed += 1
    del g.node[:]
    g.node.extend(new_nodes)
    return changed, 0, notes


PIN_TAG = "__pin_cpu__"


def pin_nodes(model, pred):
    """Renames the nodes to pin so one substring names them all; returns the pinned names."""
    names = []
    for n in model.graph.node:
        if pred(n):
            n.name = PIN_TAG + (n.name or n.op_type + "_%d" % len(names))
            names.append(n.name)
    return names


def pin_config(device):
    return {"session.name_based_layer_assignment": "%s(%s)" % (device, PIN_TAG)}


def segments(nodes, pred):
    """Splits a sorted node list into runs: each node matching pred alone (CPU), the rest in
    maximal runs (CUDA)."""
    segs, cur = [], []
    for n in nodes:
        if pred(n):
            if cur:
                segs.append(("cuda", cur))
                cur = []
            segs.append(("cpu", [n]))
        else:
            cur.append(n)
    if cur:
        segs.append(("cuda", cur))
    return segs


def extract_segments(model, types, segs, graph_input_names):
    """One model per segment: inputs = what it reads from outside, outputs = what later segments
    or the graph outputs read."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    final = [o.name for o in g.output]
    reads_after = []
    acc = set(final)
    for _, nodes in reversed(segs):
        reads_after.append(set(acc))
        for n in nodes:
            acc.update(node_reads(n))
    reads_after.reverse()
    models = []
    for (ep, nodes), later in zip(segs, reads_after):
        produced = [o for n in nodes for o in n.output if o]
        pset = set(produced)
        reads = []
        for n in nodes:
            for i in node_reads(n):
                if i not in pset and i not in reads:
                    reads.append(i)
        ins = [i for i in reads if i not in inits]
        used_inits = [inits[i] for i in reads if i in inits]
        outs = [o for o in produced if o in later]
        graph = helper.make_graph(
            [copy.deepcopy(n) for n in nodes], "seg",
            [types.value_info(i) for i in ins], [types.value_info(o, with_shape=False) for o in outs],
            initializer=[copy.deepcopy(t) for t in used_inits])
        m = helper.make_model(graph, opset_imports=list(model.opset_import))
        m.ir_version = model.ir_version
        models.append((ep, complete_outputs(m, types), ins, outs))
    return models


def single_node_model(node, types, graph, opset, ir, const_inputs, runtime_inputs, out_types=True):
    """The node alone: const_inputs {name: value} as initializers, runtime_inputs as graph inputs."""
    n = copy.deepcopy(node)
    inputs, inits = [], []
    for name in n.input:
        if not name:
            continue
        if name in const_inputs:
            inits.append(numpy_helper.from_array(np.asarray(const_inputs[name]), name))
        elif name in runtime_inputs:
            v = np.asarray(runtime_inputs[name])
            et = onnx_type_of(v.dtype)
            inputs.append(helper.make_tensor_value_info(name, et, list(v.shape)))
        else:
            raise ValueError("no value for %s of %s" % (name, node.name))
    outs = [types.value_info(o, with_shape=False) if out_types else helper.make_empty_tensor_value_info(o)
            for o in n.output if o]
    gr = helper.make_graph([n], "node", inputs, outs, initializer=inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return complete_outputs(m, types)


def onnx_type_of(dt):
    for k, v in NP_OF_ONNX.items():
        if np.dtype(v) == np.dtype(dt):
            return k
    raise ValueError("dtype %s" % dt)


def ir_for(opset):
    return 9 if opset >= 19 else (8 if opset >= 15 else 7)


# --------------------------------------------------------------------------------------------
# Probes: one op each.
# --------------------------------------------------------------------------------------------

def probe_models(rng):
    F = TensorProto.FLOAT
    x = rng.uniform(-1, 1, (1, 8, 16, 16)).astype(np.float32)
    probes = []

    def add(name, nodes, inputs, outputs, feeds, inits=(), opset=13, expect="bridged", note=""):
        gr = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
        m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = ir_for(opset)
        complete_outputs(m)
        probes.append({"name": name, "model": m, "feeds": feeds, "expect": expect, "note": note})

    vi = helper.make_tensor_value_info
    emp = helper.make_empty_tensor_value_info
    X = vi("x", F, [1, 8, 16, 16])
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    add("Add (control)", [helper.make_node("Add", ["x", "x"], ["y"])], [X], [emp("y")], {"x": x}, expect="ok",
        note="no bridge call")
    add("Relu+Conv (control)", [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                                helper.make_node("Relu", ["c"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("w", rng.uniform(-1, 1, (8, 8, 3, 3)).astype(np.float32))], expect="ok", note="no bridge call")
    add("Gather", [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [X], [emp("y")], {"x": x},
        inits=[c("i", np.array([0, 3, 5], np.int64))], expect="ok", note="ProviderHostCPU entry 0 (exists)")
    add("Unsqueeze", [helper.make_node("Unsqueeze", ["x", "a"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("a", np.array([0], np.int64))], expect="ok", note="entry 1 (exists)")
    add("Concat", [helper.make_node("Concat", ["x", "x"], ["y"], axis=1)], [X], [emp("y")], {"x": x},
        note="ConcatBase::PrepareForCompute")
    add("Split", [helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1)], [X], [emp("y"), emp("z")],
        {"x": x}, inits=[c("s", np.array([3, 5], np.int64))], note="SplitBase::PrepareForCompute")
    add("Slice (opset 13, const)", [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [X], [emp("y")],
        {"x": x}, inits=[c("s", np.array([1], np.int64)), c("e", np.array([5], np.int64)),
                         c("a", np.array([1], np.int64))], note="SliceBase::PrepareForCompute")
    add("Slice (opset 9, attrs)", [helper.make_node("Slice", ["x"], ["y"], starts=[1], ends=[5], axes=[1])], [X],
        [emp("y")], {"x": x}, opset=9, note="SliceBase::PrepareForCompute")
    add("Pad", [helper.make_node("Pad", ["x", "p"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], note="PadBase")
    add("Tile", [helper.make_node("Tile", ["x", "r"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("r", np.array([1, 2, 1, 1], np.int64))], note="TileOp::IsTileMemcpy")
    add("GatherElements", [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], [X], [emp("y")],
        {"x": x}, inits=[c("i", rng.integers(0, 8, (1, 8, 16, 16)).astype(np.int64))],
        note="GatherElements::ValidateInputShapes")
    add("CumSum", [helper.make_node("CumSum", ["x", "a"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("a", np.array(1, np.int64))], note="cumsum_op::GetAxis")
    add("ScatterND", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])], [X], [emp("y")], {"x": x},
        inits=[c("i", np.array([[0, 1]], np.int64)), c("u", np.ones((1, 16, 16), np.float32))],
        note="ScatterNDBase::ValidateShapes")
    add("Size", [helper.make_node("Size", ["x"], ["y"])], [X], [emp("y")], {"x": x}, note="Size::Compute")
    add("OneHot", [helper.make_node("OneHot", ["i", "d", "v"], ["y"])],
        [vi("i", TensorProto.INT64, [4, 5])], [emp("y")], {"i": rng.integers(0, 6, (4, 5)).astype(np.int64)},
        inits=[c("d", np.array(6, np.int64)), c("v", np.array([0, 1], np.float32))], note="OneHot ValidateInputs")
    add("Einsum", [helper.make_node("Einsum", ["x", "x"], ["y"], equation="bchw,bdhw->bcd")], [X], [emp("y")],
        {"x": x}, opset=13, note="Einsum::Compute")
    add("Resize sizes (const)", [helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="linear",
                                                  coordinate_transformation_mode="half_pixel")], [X], [emp("y")],
        {"x": x}, inits=[c("s", np.array([1, 8, 32, 32], np.int64))], opset=15,
        note="UpsampleBase::AdjustOutputSizeAsPolicy (sizes path)")
    add("Resize scales (const)", [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                                   coordinate_transformation_mode="half_pixel")], [X], [emp("y")],
        {"x": x}, inits=[c("s", np.array([1, 1, 2, 2], np.float32))], opset=15, expect="ok?",
        note="scales path: no bridge call expected")
    add("Resize nearest scales (const)", [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")], [X],
        [emp("y")], {"x": x}, inits=[c("s", np.array([1, 1, 2, 2], np.float32))], opset=13, expect="ok?",
        note="like ppocrv4_det's Resizes (that model ran)")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [vi("t", F, [1, 8, 16, 16])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [vi("e", F, [1, 8, 16, 16])])
    add("If", [helper.make_node("If", ["b"], ["y"], then_branch=then_g, else_branch=else_g)],
        [X, vi("b", TensorProto.BOOL, [])], [emp("y")], {"x": x, "b": np.array(True)},
        note="If::Init at session creation")
    return probes


# --------------------------------------------------------------------------------------------
# The exploration.
# --------------------------------------------------------------------------------------------

class Explorer:
    def __init__(self, args):
        self.args = args
        self.runner = Runner(args)
        self.results = []
        self.built = []
        self.have_ort = False
        if not args.build_only:
            import importlib.util
            self.have_ort = importlib.util.find_spec("onnxruntime") is not None
            if not self.have_ort:
                raise SystemExit("onnxruntime is not importable here: use --build-only")
        self.mdir = os.path.join(args.work, "models")
        os.makedirs(self.mdir, exist_ok=True)
        os.makedirs(args.out, exist_ok=True)

    # ---- bookkeeping
    def record(self, entry):
        self.results.append(entry)
        self.write()

    def write(self):
        meta = {"args": vars(self.args), "python": sys.version.split()[0],
                "onnx": getattr(onnx, "__version__", None), "numpy": np.__version__,
                "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        with open(os.path.join(self.args.out, "workaround_results.json"), "w") as f:
            json.dump({"meta": meta, "built": self.built, "results": self.results}, f, indent=1, default=str)
        with open(os.path.join(self.args.out, "workaround_summary.txt"), "w") as f:
            f.write(self.summary())

    def save(self, model, name):
        path = os.path.join(self.mdir, name.replace("/", "_") + ".onnx")
        onnx.save(model, path)
        return path

    # ---- running
    def cpu_ref(self, path, inputs, tag, runs=None, save=None):
        out = os.path.join(self.args.work, tag.replace("/", "_") + ".cpu.npz")
        r = self.runner.run([{"model": path, "ep": "cpu"}], inputs, save=save, outputs=out,
                            runs=self.args.cpu_runs if runs is None else runs, tag=tag + ".cpu",
                            timeout=self.args.timeout * 3)
        return r, (out if r.get("ok") else None)

    def cuda_try(self, entry, stages, inputs, ref, rtol, save=None, watch=None, cpu_check_path=None):
        """Runs one variant on CUDA (stages), compares with ref; optional CPU check of the rewrite."""
        out = os.path.join(self.args.work, "cur.npz")
        if os.path.exists(out):
            os.remove(out)
        for s in stages:
            if s["ep"] == "cuda":
                s["profile"] = True
        r = self.runner.run(stages, inputs, save=save, outputs=out, runs=self.args.runs, watch=watch,
                            tag=entry["model"] + "." + entry["variant"])
        entry["cuda"] = {k: v for k, v in r.items() if k != "runs_ms"}
        entry["status"] = r["status"]
        if r.get("ok") and ref and os.path.exists(out):
            try:
                entry["compare"] = compare(ref, out, rtol)
            except Exception as e:
                entry["compare_error"] = "%s: %s" % (type(e).__name__, e)
        if cpu_check_path and ref and not self.args.no_cpu_check:
            c, cout = self.cpu_ref(cpu_check_path, inputs, "check." + entry["model"] + "." + entry["variant"],
                                   runs=0, save=save)
            entry["rewrite_on_cpu"] = {"status": c["status"]}
            if cout:
                try:
                    entry["rewrite_on_cpu"].update(compare(ref, cout, rtol))
                    del entry["rewrite_on_cpu"]["per_output"]
                except Exception as e:
                    entry["rewrite_on_cpu"]["compare_error"] = str(e)
                os.remove(cout)
        if self.args.ortfleet and len(stages) == 1:
            entry["ortfleet"] = self.ortfleet_try(stages[0], inputs)
        self.record(entry)
        log("  %-28s %-34s %s" % (entry["variant"], entry["status"],
                                   self.fmt_cmp(entry.get("compare")) + self.fmt_time(entry)))

    def ortfleet_try(self, stage, inputs):
        cmd = [self.args.ortfleet, "start", stage["model"], "--devices", "cuda:0", "--no-model-cache",
               "--warmup-inputs", inputs]
        for k, v in (stage.get("config") or {}).items():
            cmd += ["--session-config", "%s=%s" % (k, v)]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=self.args.timeout)
            text = p.stdout.decode(errors="replace").strip().splitlines()
            return {"rc": p.returncode, "last": text[-1][:300] if text else ""}
        except subprocess.TimeoutExpired:
            return {"rc": None, "last": "timeout"}

    @staticmethod
    def fmt_cmp(c):
        if not c:
            return ""
        return "%s max_abs %.3g rel %.3g%s" % (c["verdict"], c["max_abs"], c["max_rel"],
                                                 (" (" + c["reason"] + ")") if c.get("reason") else "")

    @staticmethod
    def fmt_time(e):
        c = e.get("cuda") or {}
        return ("  p50 %.2f ms" % c["p50_ms"]) if "p50_ms" in c else ""

    # ---- probes
    def probes(self):
        log("== probes (one op each, CUDA vs CPU)")
        rng = np.random.default_rng(self.args.seed)
        for p in probe_models(rng):
            tag = "probe." + "".join(ch if ch.isalnum() else "_" for ch in p["name"]).strip("_")
            path = self.save(p["model"], tag)
            inputs = os.path.join(self.args.work, tag + ".inputs.npz")
            np.savez(inputs, **p["feeds"])
            self.built.append({"model": "probe", "variant": p["name"], "path": path, "nodes": len(p["model"].graph.node)})
            if self.args.build_only:
                continue
            entry = {"kind": "probe", "model": "probe", "variant": p["name"], "expect": p["expect"],
                     "note": "expected %s: %s" % (p["expect"], p["note"])}
            try:
                r, ref = self.cpu_ref(path, inputs, tag, runs=0)
                if not ref:
                    entry["status"] = "CPU EP: " + r["status"]
                    entry["cpu"] = r
                    self.record(entry)
                    continue
                self.cuda_try(entry, [{"model": path, "ep": "cuda"}], inputs, ref, 1e-4)
            except Exception as e:
                entry["status"] = "harness error: %s" % e
                entry["trace"] = traceback.format_exc()[-800:]
                self.record(entry)

    # ---- one model
    def prepare(self, name):
        spec = MODEL_SPECS[name]
        src = os.path.join(self.args.models, name + ".onnx")
        model = onnx.load(src)
        info = {"model": name, "source": src, "nodes": len(model.graph.node), "opset": default_opset(model)}
        info["resorted"] = topo_sort(model.graph)
        shapes = fix_input_shapes(model, spec)
        info["input_shapes"] = shapes
        rng = np.random.default_rng(self.args.seed)
        feeds = {}
        for i in graph_inputs(model):
            et = i.type.tensor_type.elem_type
            dt = NP_OF_ONNX[et]
            shp = shapes[i.name]
            if name in MODEL_SPECS and i.name in (spec.get("values") or {}):
                feeds[i.name] = np.full(shp, spec["values"][i.name], dt)
            elif dt == np.bool_:
                feeds[i.name] = np.zeros(shp, dt)
            elif np.issubdtype(dt, np.integer):
                feeds[i.name] = np.zeros(shp, dt)
            else:
                feeds[i.name] = rng.uniform(0, 1, shp).astype(dt)
        inputs = os.path.join(self.args.work, name + ".inputs.npz")
        np.savez(inputs, **feeds)
        types = Types(model)
        if types.error:
            info["shape_inference_error"] = types.error
        base = self.save(model, name + ".original")
        return spec, model, types, feeds, inputs, base, info

    def capture(self, name, model, types, inputs, names, shapes_of=()):
        """Values of intermediate tensors on the CPU EP (adds them as graph outputs); shapes_of:
        tensors whose shape only is wanted (as NAME__shape)."""
        names = [n for n in names if n]
        if not names and not shapes_of:
            return {}
        m = copy.deepcopy(model)
        have = {o.name for o in m.graph.output}
        for n in names:
            if n not in have:
                m.graph.output.append(types.value_info(n, with_shape=False))
        for n in shapes_of:
            m.graph.node.append(helper.make_node("Shape", [n], [n + "__shape"], name=n + "__shape_probe"))
            m.graph.output.append(helper.make_tensor_value_info(n + "__shape", TensorProto.INT64, None))
            names.append(n + "__shape")
        path = self.save(m, name + ".capture")
        r, out = self.cpu_ref(path, inputs, name + ".capture", runs=0, save=names)
        if not out:
            log("  capture on the CPU EP failed: " + r["status"] + " " + str(r.get("error", ""))[:300])
            return {}
        z = np.load(out)
        return {k: z[k] for k in z.files}

    def model(self, name):
        spec, model, types, feeds, inputs, base, info = self.prepare(name)
        log("== %s: %d nodes, opset %d%s" % (name, info["nodes"], info["opset"],
                                            ", re-sorted" if info["resorted"] else ""))
        self.built.append(dict(info, variant="(source)", path=base))
        rtol = spec.get("rtol", 1e-3)
        opset = default_opset(model)
        g = model.graph

        # ---- what to fold: shape computations (after freezing the spec's inputs), to a fixpoint
        frozen = {k: feeds[k] for k in spec.get("freeze") or []}
        producers = {o: n for n in g.node for o in n.output}
        np_errors, differ, cap_cache = [], [], {}

        def capture_names(names):
            need = [k for k in names if k not in cap_cache]
            if need and self.have_ort:
                got = self.capture(name, model, types, inputs, need)
                cap_cache.update(got)
                for k in need:
                    cap_cache.setdefault(k, None)
            return {k: cap_cache[k] for k in names if cap_cache.get(k) is not None}

        def evaluate(m, t, fold_nodes, boundary):
            out = {}
            try:
                v = np_eval_fold(m, t, fold_nodes, frozen)
                out.update({k: v[k] for k in boundary if k in v})
            except Exception as e:
                np_errors.append("%s: %s" % (type(e).__name__, e))
            if self.have_ort:  # exact values from the CPU EP (a Constant's from numpy)
                names = [k for k in boundary if not (k in producers and producers[k].op_type == "Constant")]
                cap = capture_names(names)
                for k, v in cap.items():
                    if k in out and (np.asarray(out[k]).shape != v.shape or not np.array_equal(np.asarray(out[k]), v)):
                        differ.append(k)
                out.update(cap)
            return out

        fmodel, fvals, fnames, flog = iterative_fold(model, frozen, evaluate)
        types.merge(Types(fmodel))
        values = dict(fvals)
        resize_inputs = [i for n in g.node if n.op_type == "Resize" for i in list(n.input)[1:]
                         if i and const_value(g, i) is None]
        slice_inputs = [i for n in g.node if n.op_type == "Slice" for i in list(n.input)[1:]
                        if i and const_value(g, i) is None] if opset >= 10 else []
        focus = spec.get("focus")
        focus_node = next((n for n in g.node if n.name == focus), None) if focus else None
        focus_inputs = [i for i in focus_node.input if i and const_value(g, i) is None] if focus_node else []
        extra = [k for k in dict.fromkeys(resize_inputs + slice_inputs + focus_inputs) if k not in values]
        if self.have_ort:
            values.update(capture_names(extra))
            # static shapes the rewrites need (Resize and Slice data inputs), measured where inference
            # left them unknown
            unknown = [n.input[0] for n in g.node if n.op_type in ("Resize", "Slice") and types.dims(n.input[0]) is None]
            unknown = list(dict.fromkeys(unknown))
            if unknown:
                got = self.capture(name + ".shapes", model, types, inputs, [], shapes_of=unknown)
                for k in unknown:
                    if k + "__shape" in got:
                        types.t[k] = (types.elem(k), [int(d) for d in got[k + "__shape"]])
                        values[k + "__shape"] = got[k + "__shape"]
        elif focus_node is not None:
            for k in focus_inputs:
                if k not in values:
                    d, et = types.dims(k), types.elem(k)
                    if d is not None and et in NP_OF_ONNX:
                        values[k] = np.random.default_rng(self.args.seed).uniform(0, 1, d).astype(NP_OF_ONNX[et])
        info_fold = {"iterations": flog, "folded_tensors": len(fnames), "nodes_after_fold": len(fmodel.graph.node),
                     "numpy_errors": np_errors[:3], "numpy_vs_cpu_ep_differ": differ[:10],
                     "values_from": "CPU EP" if self.have_ort else "numpy"}
        log("  fold: %s; %d tensors -> initializers, %d nodes left%s" % (
            "; ".join(flog) or "nothing", len(fnames), len(fmodel.graph.node),
            ("; numpy: " + np_errors[0]) if np_errors else ""))

        variants = []  # (variant, model, config, pinned, note)

        def variant(vname, fn, note=""):
            if not wanted_variant(vname):
                return
            m = copy.deepcopy(model)
            try:
                out = fn(m)
            except Exception as e:
                self.built.append({"model": name, "variant": vname, "error": "%s: %s" % (type(e).__name__, e),
                                   "trace": traceback.format_exc()[-800:]})
                log("  %-28s BUILD FAILED: %s" % (vname, e))
                return
            config, pinned, extra = (out or {}).get("config"), (out or {}).get("pinned"), (out or {}).get("info", {})
            if (out or {}).get("unchanged"):
                self.built.append({"model": name, "variant": vname, "unchanged": True, **extra})
                log("  %-28s no change (%s)" % (vname, extra.get("why", "")))
                return
            if (out or {}).get("model") is not None:
                m = out["model"]
            path = self.save(m, name + "." + vname)
            rec = {"model": name, "variant": vname, "path": path, "nodes": len(m.graph.node),
                   "op_counts": op_counts(m), "config": config, "pinned": len(pinned or []), "note": note, **extra}
            try:
                onnx.checker.check_model(m)
                rec["checker"] = "ok"
            except Exception as e:
                rec["checker"] = str(e)[:200]
            self.built.append(rec)
            log("  %-28s built: %d nodes%s%s" % (vname, rec["nodes"], (", %d pinned" % len(pinned)) if pinned else "",
                                                  (", " + "; ".join(extra.get("notes", [])[:2])) if extra.get("notes") else ""))
            variants.append((vname, path, config, pinned))

        def v_original(m):
            return {}

        def v_sizes_const(m):
            c, removed, notes = rewrite_resize_const(m, types, values, "sizes")
            if c == 0 and not notes:
                return {"unchanged": True, "info": {"why": "every Resize's roi/scales/sizes is an initializer already"}}
            return {"info": {"replaced": c, "removed_nodes": removed, "notes": notes}}

        def v_scales_const(m):
            c, removed, notes = rewrite_resize_const(m, types, values, "scales")
            if c == 0:
                return {"unchanged": True, "info": {"why": "no Resize rewritten", "notes": notes}}
            return {"info": {"rewritten": c, "removed_nodes": removed, "notes": notes}}

        def v_fold_all(m):
            if not fnames:
                return {"unchanged": True, "info": {"why": "nothing shape-only to fold"}}
            if frozen:
                freeze_inputs(m, frozen)
            removed = apply_values(m, values, set(fnames))
            inl = inline_constant_ifs(m)
            if inl:
                dead_code_eliminate(m.graph)
            return {"info": {"folded_tensors": len(fnames), "removed_nodes": removed, "inlined_ifs": inl}}

        def v_slice_const(m):
            c, removed, notes = rewrite_slice_const(m, values)
            if c == 0:
                return {"unchanged": True, "info": {"why": "; ".join(notes) or "no computed Slice parameter"}}
            return {"info": {"replaced": c, "removed_nodes": removed, "notes": notes}}

        def v_slice_to_gather(m):
            c, _, notes = rewrite_slice_to_gather(m, types, values)
            if c == 0:
                return {"unchanged": True, "info": {"why": "; ".join(notes[:3]) or "no data Slice"}}
            return {"info": {"rewritten": c, "notes": notes}}

        def v_fold_gather(m):
            v_fold_all(m)
            t2 = Types(m)
            t2.merge(types)
            c, _, notes = rewrite_slice_to_gather(m, t2, values)
            return {"info": {"rewritten": c, "notes": notes}}

        def v_scales_pin_others(m):
            rewrite_resize_const(m, types, values, "scales")
            pinned = pin_nodes(m, lambda n: n.op_type in BRIDGED_OPS and n.op_type != "Resize")
            return {"config": pin_config(self.args.pin_device), "pinned": pinned}

        def v_gather_pin_others(m):
            rewrite_slice_to_gather(m, types, values)
            pinned = pin_nodes(m, lambda n: n.op_type in BRIDGED_OPS and n.op_type != "Slice")
            return {"config": pin_config(self.args.pin_device), "pinned": pinned}

        def pin_ops(ops):
            def fn(m):
                pinned = pin_nodes(m, lambda n: n.op_type in ops)
                if not pinned:
                    return {"unchanged": True, "info": {"why": "no %s node" % "/".join(sorted(ops))}}
                return {"config": pin_config(self.args.pin_device), "pinned": pinned}
            return fn

        def wanted_variant(vname):
            return not self.args.variants or any(vname == v or vname.startswith(v) for v in self.args.variants)

        ops = {n.op_type for n in g.node}
        variant("original", v_original)
        if "Resize" in ops:
            variant("sizes_const", v_sizes_const, "computed Resize roi/scales/sizes -> initializers")
            variant("scales_const", v_scales_const, "Resize with constant float scales, no sizes, roi empty")
        variant("fold_all_shapes", v_fold_all, "shape-only computations folded for the fixed input shapes"
                + (" (inputs %s frozen), constant Ifs inlined" % list(frozen) if frozen else ""))
        if "Slice" in ops:
            variant("slice_const", v_slice_const, "computed Slice starts/ends/axes/steps -> initializers")
            variant("slice_to_gather", v_slice_to_gather, "data Slices -> Gather with constant indices")
            variant("fold+slice_to_gather", v_fold_gather, "fold_all_shapes, then Slices -> Gather")
        bridged_here = sorted(ops & BRIDGED_OPS)
        if "Resize" in ops:
            variant("pin_resize_cpu", pin_ops({"Resize"}), "Resize nodes pinned to the CPU EP (layering)")
            variant("scales_const+pin_others", v_scales_pin_others,
                    "scales_const, and the other bridged ops pinned to the CPU EP")
        if "Slice" in ops:
            variant("pin_slice_cpu", pin_ops({"Slice"}), "Slice nodes pinned to the CPU EP (layering)")
            variant("gather+pin_others", v_gather_pin_others,
                    "slice_to_gather, and the other bridged ops pinned to the CPU EP")
        if "If" in ops:
            variant("pin_if_cpu", pin_ops({"If"}), "If nodes pinned to the CPU EP (layering)")
        if bridged_here:
            variant("pin_bridged_cpu", pin_ops(BRIDGED_OPS), "every bridged op (%s) pinned to the CPU EP"
                    % ", ".join(bridged_here))
        splits = []
        if spec.get("split") and (wanted_variant("split_first") or wanted_variant("split_all")):
            is_resize = lambda n: n.op_type == "Resize"
            segs_all = segments(list(g.node), is_resize)
            first = next(k for k, (_, nodes) in enumerate(segs_all) if nodes[0].op_type == "Resize")
            head = [n for _, nodes in segs_all[:first] for n in nodes]
            rest = [n for _, nodes in segs_all[first + 1:] for n in nodes]
            segs_first = [("cuda", head), segs_all[first], ("cuda", rest)]
            for vname, segs in (("split_first", segs_first), ("split_all", segs_all)):
                if not wanted_variant(vname):
                    continue
                try:
                    parts = extract_segments(model, types, segs, [i.name for i in graph_inputs(model)])
                    stages = []
                    for k, (ep, m, ins, outs) in enumerate(parts):
                        p = self.save(m, "%s.%s.%02d_%s" % (name, vname, k, ep))
                        stages.append({"model": p, "ep": ep})
                    self.built.append({"model": name, "variant": vname, "sessions": len(stages),
                                       "cuda_sessions": sum(1 for s in stages if s["ep"] == "cuda"),
                                       "cpu_sessions": sum(1 for s in stages if s["ep"] == "cpu"),
                                       "note": "separate sessions: Resize on the CPU EP, the rest on CUDA"})
                    log("  %-28s built: %d sessions" % (vname, len(stages)))
                    splits.append((vname, stages))
                except Exception as e:
                    self.built.append({"model": name, "variant": vname, "error": str(e),
                                       "trace": traceback.format_exc()[-800:]})
                    log("  %-28s BUILD FAILED: %s" % (vname, e))
        self.built.append({"model": name, "variant": "(fold plan)", **info_fold})

        # ---- single-node models of the located node
        node_variants = self.node_variants(name, spec, model, types, values, focus_node) if focus_node else []

        if self.args.build_only:
            return
        stages_wanted = self.args.stage
        # the reference: the original on the CPU EP
        save = [o.name for o in g.output]
        if "nodes" in stages_wanted:
            self.run_node_variants(name, node_variants)
        if "full" in stages_wanted:
            r, ref = self.cpu_ref(base, inputs, name + ".original", save=save)
            self.record({"kind": "full", "model": name, "variant": "cpu_ep_reference", "status": r["status"],
                         "cpu": {k: v for k, v in r.items() if k != "runs_ms"}})
            log("  %-28s %s p50 %s ms" % ("CPU EP reference", r["status"], "%.2f" % r["p50_ms"] if "p50_ms" in r else "-"))
            for vname, path, config, pinned in variants:
                entry = {"kind": "full", "model": name, "variant": vname}
                self.cuda_try(entry, [{"model": path, "ep": "cuda", "config": config}], inputs, ref, rtol,
                              save=save, watch=pinned,
                              cpu_check_path=None if vname == "original" or vname.startswith("pin_") else path)
            for vname, stages in splits:
                entry = {"kind": "full", "model": name, "variant": vname, "sessions": len(stages)}
                self.cuda_try(entry, stages, inputs, ref, rtol, save=save)

    # ---- the located node alone
    def node_variants(self, name, spec, model, types, values, node):
        g = model.graph
        opset = default_opset(model)
        data_in = node.input[0]
        if data_in not in values:
            log("  no value for %s: single-node models skipped" % data_in)
            self.built.append({"model": name, "variant": "node/*", "error": "no value for " + data_in})
            return []
        x = np.asarray(values[data_in])
        out = []
        feeds = {data_in: x}
        inputs = os.path.join(self.args.work, name + ".node.inputs.npz")

        def add(vname, m, extra_feeds=None, config=None, pinned=None, note=""):
            path = self.save(m, name + ".node." + vname)
            f = dict(feeds)
            f.update(extra_feeds or {})
            ip = inputs if not extra_feeds else os.path.join(self.args.work, "%s.node.%s.inputs.npz" % (name, vname))
            np.savez(ip, **f)
            self.built.append({"model": name, "variant": "node/" + vname, "path": path, "nodes": len(m.graph.node),
                               "opset": default_opset(m), "note": note, "input_from": "CPU EP" if self.have_ort else "random"})
            out.append(("node/" + vname, path, ip, config, pinned))

        if node.op_type == "Resize":
            in_dims = list(x.shape)
            sizes_name = node.input[3] if len(node.input) > 3 and node.input[3] else None
            sizes = const_value(g, sizes_name, values) if sizes_name else None
            if sizes is None:
                scales0 = const_value(g, node.input[2], values)
                sizes = np.array([int(d * s) for d, s in zip(in_dims, np.asarray(scales0).reshape(-1))], np.int64)
            sizes = np.asarray(sizes, np.int64).reshape(-1)
            scales = np.array([o / i for o, i in zip(sizes, in_dims)], np.float32)
            keep = {a.name: helper.get_attribute_value(a) for a in node.attribute}

            def resize_node(op_set, how):
                attrs = dict(keep)
                if op_set < 18:
                    for k in ("antialias", "axes", "keep_aspect_ratio_policy"):
                        attrs.pop(k, None)
                if op_set < 11:
                    attrs = {"mode": attrs.get("mode", "nearest")}
                roi, sc, sz = "", "", ""
                inits, runtime = {}, {}
                if op_set < 13:
                    roi = "roi"
                    inits["roi"] = np.zeros(0, np.float32)
                if how.startswith("sizes"):
                    sz = "sizes"
                    (inits if how == "sizes_const" else runtime)["sizes"] = sizes
                    if op_set < 13:
                        sc = "scales_empty"
                        inits["scales_empty"] = np.zeros(0, np.float32)
                else:
                    sc = "scales"
                    (inits if how == "scales_const" else runtime)["scales"] = scales
                ins = [data_in, roi, sc, sz]
                while ins and ins[-1] == "":
                    ins.pop()
                n = helper.make_node("Resize", ins, [node.output[0]], name=node.name, **attrs)
                m = single_node_model(n, types, g, op_set, ir_for(op_set), inits, dict(runtime, **{data_in: x}))
                return m, runtime

            consts, runtime = {}, {data_in: x}
            for i in node.input[1:]:
                if not i:
                    continue
                v = const_value(g, i)
                if v is not None:
                    consts[i] = v
                elif i in values:
                    runtime[i] = values[i]
            m = single_node_model(node, types, g, opset, ir_for(opset), consts, runtime)
            add("original", m, {k: v for k, v in runtime.items() if k != data_in},
                note="as in the model (opset %d; computed inputs fed at run time)" % opset)
            for how in ("sizes_const", "sizes_input", "scales_const", "scales_input"):
                m, rt = resize_node(opset, how)
                add(how, m, rt, note="opset %d" % opset)
            for op_set in self.args.opsets:
                for how in ("sizes_const", "scales_const"):
                    m, rt = resize_node(op_set, how)
                    add("opset%d_%s" % (op_set, how), m, rt, note="Resize-%d" % op_set)
            m = single_node_model(node, types, g, opset, ir_for(opset), consts, runtime)
            pinned = pin_nodes(m, lambda n: True)
            add("pin_cpu", m, {k: v for k, v in runtime.items() if k != data_in}, config=pin_config(self.args.pin_device),
                pinned=pinned, note="the node pinned to the CPU EP (layering), CUDA EP registered")
        elif node.op_type == "Slice":
            p = slice_params(node, g, opset, values)
            starts, ends, axes, steps = p
            m = single_node_model(node, types, g, opset, ir_for(max(opset, 7)), {}, {data_in: x})
            add("original", m, note="Slice-%d as in the model" % opset)
            for op_set in (10, 13):
                for how in ("const", "input"):
                    arrs = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64),
                            "axes": np.array(axes, np.int64), "steps": np.array(steps, np.int64)}
                    n = helper.make_node("Slice", [data_in, "starts", "ends", "axes", "steps"], [node.output[0]],
                                         name=node.name)
                    mm = single_node_model(n, types, g, op_set, ir_for(op_set), arrs if how == "const" else {},
                                           dict(arrs, **{data_in: x}) if how == "input" else {data_in: x})
                    add("opset%d_%s" % (op_set, how), mm, arrs if how == "input" else None,
                        note="Slice-%d, parameters %s" % (op_set, "initializers" if how == "const" else "graph inputs"))
            mm = copy.deepcopy(m)
            t2 = Types(mm)
            rewrite_slice_to_gather(mm, t2, {}, only_data=False)
            add("gather", mm, note="Gather with constant indices instead")
            mm = copy.deepcopy(m)
            pinned = pin_nodes(mm, lambda n: True)
            add("pin_cpu", mm, config=pin_config(self.args.pin_device), pinned=pinned,
                note="the node pinned to the CPU EP (layering), CUDA EP registered")
        return out

    def run_node_variants(self, name, node_variants):
        if not node_variants:
            return
        log("  -- single-node models")
        ref = None
        for vname, path, ip, config, pinned in node_variants:
            if self.args.variants and vname != "node/original" and not any(
                    vname == v or vname.startswith(v) for v in self.args.variants):
                continue
            if vname == "node/original":
                r, ref = self.cpu_ref(path, ip, name + ".node.original", runs=0)
                if not ref:
                    self.record({"kind": "node", "model": name, "variant": "node/original on the CPU EP",
                                 "status": r["status"], "cpu": r})
            entry = {"kind": "node", "model": name, "variant": vname}
            self.cuda_try(entry, [{"model": path, "ep": "cuda", "config": config}], ip, ref, 1e-4, watch=pinned,
                          cpu_check_path=None if vname in ("node/original", "node/pin_cpu") else path)

    # ---- the summary
    def summary(self):
        L = []
        L.append("workaround_explore.py: %s" % time.strftime("%Y-%m-%d %H:%M:%S"))
        L.append("")
        if self.built:
            L.append("built")
            L.append("%-14s %-28s %6s  %s" % ("model", "variant", "nodes", "what"))
            for b in self.built:
                if b.get("variant") == "(fold plan)":
                    L.append("%-14s %-28s %6s  fold: %s; %d tensors -> initializers (values from %s), %d nodes left%s%s" % (
                        b["model"], "", "", "; ".join(b["iterations"]) or "nothing", b["folded_tensors"],
                        b["values_from"], b["nodes_after_fold"],
                        ("; numpy: " + b["numpy_errors"][0]) if b.get("numpy_errors") else "",
                        ("; numpy and the CPU EP differ on %s" % b["numpy_vs_cpu_ep_differ"])
                        if b.get("numpy_vs_cpu_ep_differ") else ""))
                    continue
                what = b.get("note", "")
                if b.get("error"):
                    what = "BUILD FAILED: " + b["error"]
                elif b.get("unchanged"):
                    what = "no change: " + str(b.get("why", ""))
                elif "sessions" in b:
                    what = "%d sessions (%d CUDA, %d CPU)" % (b["sessions"], b["cuda_sessions"], b["cpu_sessions"])
                extra = []
                for k in ("replaced", "rewritten", "folded_tensors", "removed_nodes", "pinned"):
                    if b.get(k):
                        extra.append("%s %s" % (k.replace("_", " "), b[k]))
                if b.get("inlined_ifs"):
                    extra.append("inlined " + "; ".join(b["inlined_ifs"]))
                if b.get("notes"):
                    extra.append("; ".join(b["notes"][:3]))
                if b.get("checker") and b["checker"] != "ok":
                    extra.append("checker: " + b["checker"][:80])
                L.append("%-14s %-28s %6s  %s%s" % (b.get("model", ""), b.get("variant", ""), b.get("nodes", ""),
                                                     what, (" [" + ", ".join(extra) + "]") if extra else ""))
            L.append("")
        if self.results:
            L.append("runs (CUDA EP through the plugin path; compared with the CPU EP; p50 of %d runs)" % self.args.runs)
            L.append("%-14s %-28s %-36s %-9s %10s %10s %10s  %s" % ("model", "variant", "status", "outputs",
                                                                  "max_abs", "max_rel", "p50 ms", "EPs (nodes) / note"))
            for e in self.results:
                c = e.get("compare") or {}
                cu = e.get("cuda") or e.get("cpu") or {}
                eps = ""
                prof = cu.get("profile")
                if prof:
                    eps = " ".join("%s:%d" % (k.replace("ExecutionProvider", ""), v)
                                   for k, v in sorted(prof["nodes_per_ep"].items()))
                    w = prof.get("watched") or {}
                    if w:
                        cnt = {}
                        for v in w.values():
                            cnt[v] = cnt.get(v, 0) + 1
                        eps += " pinned->" + ",".join("%s:%d" % (k.replace("ExecutionProvider", ""), v)
                                                     for k, v in cnt.items())
                note = e.get("note", "")
                if c.get("reason"):
                    note = c["reason"] + "; " + note
                if e.get("rewrite_on_cpu"):
                    rc = e["rewrite_on_cpu"]
                    note += " rewrite on CPU EP: %s" % (rc.get("verdict") or rc.get("status"))
                if e.get("ortfleet"):
                    note += " ortfleet rc=%s" % e["ortfleet"]["rc"]
                if cu.get("error") and not cu.get("ok"):
                    note += " " + cu["error"][:160].replace("\n", " ")
                L.append("%-14s %-28s %-36s %-9s %10s %10s %10s  %s %s" % (
                    e["model"], e["variant"][:28], e["status"][:36], c.get("verdict", ""),
                    "%.3g" % c["max_abs"] if "max_abs" in c else "", "%.3g" % c["max_rel"] if "max_rel" in c else "",
                    "%.2f" % cu["p50_ms"] if "p50_ms" in cu else "", eps, note.strip()))
        return "\n".join(L) + "\n"

    def go(self):
        models = self.args.only or [m for m in MODEL_SPECS
                                    if os.path.exists(os.path.join(self.args.models, m + ".onnx"))]
        for m in REQUIRED_MODELS:
            if m in models and not os.path.exists(os.path.join(self.args.models, m + ".onnx")):
                log("missing %s.onnx in %s" % (m, self.args.models))
        if "probes" in self.args.stage:
            self.probes()
        for m in models:
            if not os.path.exists(os.path.join(self.args.models, m + ".onnx")):
                continue
            if m not in MODEL_SPECS:
                log("unknown model %s (known: %s)" % (m, ", ".join(MODEL_SPECS)))
                continue
            try:
                self.model(m)
            except Exception as e:
                self.built.append({"model": m, "variant": "*", "error": "%s: %s" % (type(e).__name__, e),
                                   "trace": traceback.format_exc()[-1500:]})
                log("%s failed: %s" % (m, traceback.format_exc()))
            self.write()
        self.write()
        log("wrote %s" % os.path.join(self.args.out, "workaround_summary.txt"))


def op_counts(m):
    c = {}
    for n in m.graph.node:
        c[n.op_type] = c.get(n.op_type, 0) + 1
    return c


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return worker_main(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True, help="folder with isnet_quint8.onnx, isnet_fp16.onnx, ppocrv4_rec.onnx")
    ap.add_argument("--out", required=True, help="where the JSON and the text summary go (small)")
    ap.add_argument("--work", default=None, help="models, inputs and outputs (large); default /tmp/ortfleet-workaround")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--stage", default="probes,nodes,full", help="any of probes,nodes,full")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per CUDA try (p50)")
    ap.add_argument("--cpu-runs", type=int, default=5, help="timed runs of the CPU EP reference")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per CUDA try")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opsets", default="11,13,18,19", help="opsets of the single-node Resize variants")
    ap.add_argument("--pin-device", default="cpu", help="device designator in session.name_based_layer_assignment")
    ap.add_argument("--cuda-ep", default=os.environ.get("ORTFLEET_CUDA_EP"), help="libonnxruntime_providers_cuda.so")
    ap.add_argument("--ortfleet", default=None, help="also start each single-session variant with this ortfleet "
                                                    "binary (ONNX Runtime 1.29's core): crash or not")
    ap.add_argument("--no-cpu-check", action="store_true", help="skip running each rewrite on the CPU EP")
    ap.add_argument("--variants", default=None, help="comma-separated variant names or prefixes to build/run "
                                                     "(e.g. original,scales_const,node/); default all")
    ap.add_argument("--deadline", type=float, default=560, help="seconds after which no new try starts "
                                                             "(a device call is cut at 600 s)")
    ap.add_argument("--build-only", action="store_true", help="only build the variant models (no onnxruntime needed)")
    args = ap.parse_args()
    if onnx is None:
        raise SystemExit("the onnx package is needed (apt-get install python3-onnx / pip install onnx)")
    args.work = os.path.abspath(args.work or "/tmp/ortfleet-workaround")
    args.out = os.path.abspath(args.out)
    args.only = [m for m in args.only.split(",") if m] if args.only else None
    args.stage = {s.strip() for s in args.stage.split(",") if s.strip()}
    args.opsets = [int(o) for o in args.opsets.split(",") if o]
    args.variants = [v for v in args.variants.split(",") if v] if args.variants else None
    args.t0 = time.monotonic()
    if not args.build_only and not args.cuda_ep:
        raise SystemExit("set ORTFLEET_CUDA_EP (source /tmp/ortfleet-device/parts/env.sh) or pass --cuda-ep")
    os.makedirs(args.work, exist_ok=True)
    Explorer(args).go()
    return 0


if __name__ == "__main__":
    sys.exit(main())
