#!/usr/bin/env bash
# The GPU test GpuDoctor.ACrashingNodeIsWorkedAroundOnTheCpuEpWithItsOutputsChecked, step by step: a
# Resize with sizes (crashes the CPU-only core's CUDA EP), located and worked around by doctor, then
# started with the config it wrote: by auto (a worker, since the crash is remembered), in-process,
# in worker processes, and with the entry as a flag.
set -u
C=/tmp/wa-cache; rm -rf $C /tmp/wa; mkdir -p /tmp/wa
export ORTFLEET_CACHE=$C ORTFLEET_AUTO_POOL=0
bash bench/device/pin_cache.sh > /dev/null 2>&1  # writes /tmp/rs.onnx
$ORTFLEET -q doctor /tmp/rs.onnx --locate-crash --device cuda:0 --out /tmp/wa/located > /tmp/wa/locate.txt 2>&1; echo "locate rc=$?"
grep -E "works|no  |start it|config entry" /tmp/wa/locate.txt | cut -c1-300
cat /tmp/wa/located/workaround.json
for s in auto sequential processes fleet; do
  $ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --config /tmp/wa/located/workaround.json --strategy $s > /tmp/wa/start-$s.txt 2>&1
  echo "start --config, strategy $s: rc=$? $(grep -v '^warning' /tmp/wa/start-$s.txt | tail -c 400 | tr '\n' ' ')"
done
$ORTFLEET -q start /tmp/rs.onnx --devices cuda:0 --session-config "session.name_based_layer_assignment=cpu(upsample)" > /tmp/wa/start-flag.txt 2>&1
echo "start --session-config (auto): rc=$? $(grep -v '^warning' /tmp/wa/start-flag.txt | tail -c 400 | tr '\n' ' ')"
ls $C $C/crashes 2>/dev/null
