#!/usr/bin/env bash
# Which part of a start undoes a node pinned to the CPU EP (session.name_based_layer_assignment)? A
# Resize with sizes (crashes the CPU-only core's CUDA EP) pinned, started with and without the model
# cache, in-process and through the fleet, and as one doctor --crash-step try.
set -u
python3 - <<'PY'
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16, 16])
sizes = numpy_helper.from_array(np.array([1, 2, 16, 16], dtype=np.int64), "sizes")
nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Resize", ["r", "", "", "sizes"], ["y"], name="upsample", mode="linear", coordinate_transformation_mode="half_pixel")]
m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [sizes]), opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, "/tmp/rs.onnx")
PY
E="session.name_based_layer_assignment=cpu(upsample)"
run() { local label=$1; shift; ORTFLEET_CACHE=/tmp/pc-$label ORTFLEET_AUTO_POOL=0 "$@" > /tmp/pc-$label.log 2>&1; echo "$label rc=$? $(grep -v '^warning\|^\[' /tmp/pc-$label.log | tail -c 300 | tr '\n' ' ')"; }
run nopin_nocache $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --no-model-cache --strategy sequential
run pin_nocache_seq $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --no-model-cache --strategy sequential
run pin_cache_seq $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential
run pin_cache_again $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential
run pin_nocache_proc $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --no-model-cache --strategy processes
run pin_crash_step $ORTFLEET -q doctor /tmp/rs.onnx --crash-step /tmp --device cuda:0 --session-config "$E"
run pin_nospin $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --no-model-cache --strategy sequential --session-config session.intra_op.allow_spinning=1
