#!/usr/bin/env bash
# Data-parallel replicas against one chain with the same kernel threads:
# serves configs/replicas_one.json (1 chain x 2 threads) and then
# configs/replicas_two.json (2 chains x 1 thread), drives each with the
# same closed-loop workload through `troupe bench --server`, and prints
# the aggregate output tok/s of both and their ratio.
#
#   bench/replicas.sh [-b build/release] [-m MODEL] [-w WORKLOAD] [-c CLIENTS] [-n REQUESTS] [-o OUT]
#
# Defaults: the default model, configs/workloads/concurrency_8.json, 8
# clients, 64 requests, results under build/bench-replicas/{one,two}.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/release
model=$HOME/.cache/troupe/models/SmolLM2-135M-Instruct.Q4_1.gguf
workload=$root/configs/workloads/concurrency_8.json
clients=8
requests=64
out=$root/build/bench-replicas
while getopts "b:m:w:c:n:o:h" opt; do
  case $opt in
    b) build=$OPTARG ;;
    m) model=$OPTARG ;;
    w) workload=$OPTARG ;;
    c) clients=$OPTARG ;;
    n) requests=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
troupe=$build/troupe
[[ -x $troupe ]] || { echo "replicas.sh: no $troupe (build it, or pass -b BUILD_DIR)" >&2; exit 1; }
[[ -f $model ]] || { echo "replicas.sh: no model at $model (pass -m)" >&2; exit 1; }
mkdir -p "$out"

server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT

# Serves one config on a free port, runs the workload against it, and
# leaves the run's output tok/s in $out/<name>.tok_s.
run() {
  local name=$1 log=$out/serve_$1.log port=
  "$troupe" serve --config "$root/configs/replicas_$name.json" -m "$model" --port 0 >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\)/.*#\1#p' "$log" | head -1)
    if [[ -n $port ]] && curl -sf "http://127.0.0.1:$port/ready" >/dev/null; then break; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null || { echo "replicas.sh: $name never got ready" >&2; exit 1; }
  "$troupe" bench --server "127.0.0.1:$port" -m "$model" -w "$workload" --clients "$clients" -n "$requests" \
    --no-plot -o "$out/$name" >/dev/null 2>"$out/bench_$name.log"
  curl -sf "http://127.0.0.1:$port/metrics" | grep '^troupe_replica_routed_total' >"$out/routed_$name.txt" || true
  stop_server
  awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "output_tok_per_s") col = i }
            NR == 2 { print $col }' "$out/$name/results.csv" >"$out/$name.tok_s"
}

run one
run two
one=$(cat "$out/one.tok_s")
two=$(cat "$out/two.tok_s")
printf '%-34s %12s\n' "topology" "output tok/s"
printf '%-34s %12.1f\n' "1 replica x 2 threads" "$one"
printf '%-34s %12.1f\n' "2 replicas x 1 thread" "$two"
awk -v a="$one" -v b="$two" 'BEGIN { printf "ratio (2 replicas / 1): %.2f\n", b / a }'
echo "routed per replica (2 replicas):"
sed 's/^/  /' "$out/routed_two.txt"
