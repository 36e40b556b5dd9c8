#!/usr/bin/env bash
# The false-verdict rate and the power of `gpu-bench compare` on real
# reports (issue 26): 2N runs of `gpu-bench timer` (default set, every mode),
# compared in N disjoint pairs.
#   A/A:     a pair with any verdict (exit 1) counts once, however many rows.
#   planted: the pair's new report with one row's samples x1.10 (the rows
#            taken in turn, only rows with more than one sample); caught when
#            that row's verdict is SLOWER.
# Targets: A/A <= 5 % of pairs, planted >= 95 %, over >= 100 pairs.
#
# usage: compare-aa.sh GPU_BENCH_BINARY PAIRS OUT_DIR [timer flags...]
# e.g.   compare-aa.sh target/gpu-bundle/bin/gpu-bench 100 /tmp/aa
set -euo pipefail
bin=$1 pairs=$2 out=$3
shift 3
mkdir -p "$out"
# Reports already in OUT_DIR/run-I (made on the GPU machine, compared
# here) are kept: the comparison needs no GPU.
for i in $(seq 0 $((2 * pairs - 1))); do
  [ -f "$out/run-$i/results.json" ] || "$bin" "$@" --out "$out/run-$i" timer >/dev/null
done
false_reports=0 caught=0 errors=0
for p in $(seq 0 $((pairs - 1))); do
  old="$out/run-$((2 * p))/results.json" new="$out/run-$((2 * p + 1))/results.json"
  rc=0
  "$bin" compare "$old" "$new" --format json >"$out/aa-$p.json" || rc=$?
  case $rc in 0) ;; 1) false_reports=$((false_reports + 1)) ;; *) errors=$((errors + 1)) ;; esac
  planted=$(python3 - "$new" "$p" "$out/planted-$p.json" <<'PY'
import json, sys
new, p, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(new))
rows = [(i, j) for i, rec in enumerate(r["records"]) for j, m in enumerate(rec["modes"]) if len(m["samples"]) > 1]
i, j = rows[p % len(rows)]
m = r["records"][i]["modes"][j]
m["samples"] = [x * 1.10 for x in m["samples"]]
json.dump(r, open(dst, "w"))
rec = r["records"][i]
key = rec["name"] + "{" + ",".join(f"{k}={v}" for k, v in rec["params"].items()) + "}" if rec["params"] else rec["name"]
print(f"{key}\t{m['mode']}")
PY
)
  "$bin" compare "$old" "$out/planted-$p.json" --format json >"$out/planted-$p.out.json" || true
  if python3 - "$out/planted-$p.out.json" "$planted" <<'PY'
import json, sys
key, mode = sys.argv[2].split("\t")
c = json.load(open(sys.argv[1]))["comparisons"]
sys.exit(0 if any(r["key"] == key and r["what"] == mode and r["verdict"] == "slower" for r in c) else 1)
PY
  then caught=$((caught + 1)); fi
done
echo "A/A: $false_reports/$pairs reports with a verdict; planted +10%: caught $caught/$pairs; errors (exit 2+): $errors"
