#!/bin/bash
# The reproducer (MODE=gpu-sync or raw) under racecheck, TRIES times; on the
# first process still running after W/2 seconds, dumps its threads (name,
# state, syscall, library of the pc) and crude stacks (stacks.py).
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export GPU_SYNC_DRIVER=cuda MODE=${MODE:-gpu-sync} ROUNDS=${ROUNDS:-20}
ex=target/gpu-bundle/bin/racecheck_threads
for i in $(seq ${TRIES:-5}); do
  $cs --tool racecheck --print-limit 20 $ex > $OUT/t$i.log 2>&1 &
  cpid=$!
  for s in $(seq ${W:-30}); do sleep 0.5; kill -0 $cpid 2>/dev/null || break; done
  if kill -0 $cpid 2>/dev/null; then
    echo "try $i: HUNG"
    p=$(pgrep -x racecheck_threa | head -1); echo "pid $p"
    for t in /proc/$p/task/*; do
      sc=$(cat $t/syscall 2>/dev/null); pc=${sc##* }
      lib=$(python3 -c '
import sys
p, pc = sys.argv[1], int(sys.argv[2], 16)
for l in open(f"/proc/{p}/maps"):
    a, rest = l.split(" ", 1); lo, hi = (int(x, 16) for x in a.split("-"))
    if lo <= pc < hi:
        f = rest.split(); print((f[4] if len(f) >= 5 else "anon"), hex(pc - lo + int(f[1], 16))); break
' $p $pc 2>/dev/null)
      echo "  $(basename $t) $(cat $t/comm) st=$(awk '{print $3}' $t/stat) wchan=$(cat $t/wchan) sys=${sc%% *} $lib"
    done
    python3 target/gpu-bundle/stacks.py $p > $OUT/stacks.txt 2>&1; head -c 20000 $OUT/stacks.txt
    grep -v "^ *[0-9]*: \|^stack backtrace\|^note: Some\|^$\|deliberate panic\|^thread '<unnamed>'" $OUT/t$i.log | tail -20
    kill -9 $p $cpid 2>/dev/null; wait $cpid 2>/dev/null
    break
  else
    wait $cpid; echo "try $i: exit $?"; grep -E "\[(WARN|ERROR)\]|Internal" $OUT/t$i.log | head -5
  fi
  rm -f $OUT/t$i.log
done
