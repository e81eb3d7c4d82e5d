#!/usr/bin/env bash
# stream_ab.sh NAME MODEL INPUT BUCKET_SIZES [bench flags...]: `bench --inference --shape-stream` of 24 image
# sizes (INPUT=1x3x[320:960:32]x[320:960:32]) with buckets BUCKET_SIZES on dims 2 and 3, on GPU 0.
# $RESULTS/NAME-stream.json and .txt.
set -u
name=$1 model=$2 input=$3 sizes=$4; shift 4
export ORTFLEET_AUTO_POOL=0 ORTFLEET_CACHE=/tmp/cache-stream-$name
$ORTFLEET bench "$model" --inference --devices 0 --shape-stream "$input=1x3x[320:960:32]x[320:960:32]" --stream-count 24 \
  --buckets "$input.2=$sizes" --buckets "$input.3=$sizes" --export-json "$RESULTS/$name-stream.json" "$@" > "$RESULTS/$name-stream.txt" 2>&1
grep -E "buckets|padded call|onnxruntime Python|call overhead|default policy" "$RESULTS/$name-stream.txt"
