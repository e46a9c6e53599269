#!/usr/bin/env bash
# tools/plot_gemm_rs.py on both of bench_gemm_rs's CSV kinds (a PNG each) and on a CSV of
# neither kind (refused: nonzero exit, nothing written). Needs matplotlib.
set -eu
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/ranks.csv" <<'CSV'
ranks,dtype,op,M,N,K,variant,ms,x_gemm_alone,hidden
2,bf16,rs,1024,8192,8192,pipelined,0.31,1.21,0.62
2,bf16,rs,4096,8192,8192,pipelined,0.93,1.12,0.71
2,bf16,rs,1024,8192,8192,cublas+nccl,0.42,1.64,0
2,bf16,rs,4096,8192,8192,cublas+nccl,1.21,1.46,0
2,bf16,ar,1024,8192,8192,fused,0.35,1.37,0.55
2,bf16,ar,4096,8192,8192,fused,1.02,1.23,0.58
CSV
# the local kind: a real `bench_gemm_rs local` CSV (one H100, 24 shapes), kept here as the fixture
cp tests/tools/bench_gemm_rs_local_h100.csv "$d/local.csv"
python3 tools/plot_gemm_rs.py "$d/ranks.csv" "$d/ranks.png"
python3 tools/plot_gemm_rs.py "$d/local.csv" "$d/local.png"
for f in ranks local; do
  [ "$(head -c 8 "$d/$f.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || { echo "$f.png is not a PNG"; exit 1; }
done
printf 'a,b\n1,2\n' >"$d/other.csv"
if python3 tools/plot_gemm_rs.py "$d/other.csv" "$d/other.png"; then echo "a CSV of neither kind was accepted"; exit 1; fi
[ ! -e "$d/other.png" ] || { echo "a refused CSV still wrote a PNG"; exit 1; }
echo "both kinds drawn, the other refused"
