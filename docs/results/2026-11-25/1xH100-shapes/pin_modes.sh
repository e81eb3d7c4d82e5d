#!/usr/bin/env bash
# Which of the fleet strategy's differences undoes a node pinned to the CPU EP: the model cache (the
# fleet turns it on, sequential leaves it off), the fleet's tuned threads, or the model read ahead?
set -u
bash bench/device/pin_cache.sh > /dev/null 2>&1  # writes /tmp/rs.onnx
E="session.name_based_layer_assignment=cpu(upsample)"
run() { local label=$1; shift; rm -rf /tmp/pm-$label; ORTFLEET_CACHE=/tmp/pm-$label ORTFLEET_AUTO_POOL=0 "$@" > /tmp/pm-$label.log 2>&1; echo "$label rc=$? $(grep -v '^warning\|^\[' /tmp/pm-$label.log | tail -c 250 | tr '\n' ' ')"; }
run fleet_nocache $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy fleet --no-model-cache
run fleet_cache $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy fleet --model-cache
run seq_cache $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential --model-cache
run seq_cache_again $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential --model-cache
run seq_cache_ort $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential --model-cache --model-cache-format ort
run seq_nospin $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "$E" --strategy sequential --no-model-cache --intra-threads 4 --session-config session.intra_op.allow_spinning=0
ls /tmp/pm-seq_cache/models 2>/dev/null
