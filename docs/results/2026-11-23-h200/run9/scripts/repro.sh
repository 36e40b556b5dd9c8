#!/bin/bash
# Racecheck over tests/examples/racecheck_threads (copied to
# target/gpu-bundle/bin/): P processes per mode, each ROUNDS rounds, counting
# the processes that hang (exit 124), report the internal error, or pass.
#   MODES="raw gpu-sync" P=6 ROUNDS=20 T=60 [HOSTFN=0|1] [LIKE=1] [KEEP=1] [SERIAL=1]
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export GPU_SYNC_DRIVER=cuda
ex=target/gpu-bundle/bin/racecheck_threads
for mode in ${MODES:-raw gpu-sync}; do
  for i in $(seq ${P:-6}); do
    MODE=$mode ROUNDS=${ROUNDS:-20} timeout ${T:-60} $cs --tool racecheck --error-exitcode 99 --print-limit 20 $ex > /tmp/r.log 2>&1
    rc=$?
    echo "$mode #$i rc=$rc internal=$(grep -c 'Internal Sanitizer' /tmp/r.log) $(grep -E 'SUMMARY|rounds' /tmp/r.log | tr '\n' ' ')"
    [ $rc -ne 0 ] && cp /tmp/r.log $OUT/$mode-h${HOSTFN:-1}-$i.log
  done
done
