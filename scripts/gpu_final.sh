#!/usr/bin/env bash
# Last device call of the session: rope_rmsnorm's persistent forward
# (correctness on the GPU, bench, the autotuner's pick, same-size copy) and
# a profile of the Gluon softmax launch.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 GPULAB_HOME=/tmp/gpulab-ws
OUT=${OUT:-/tmp/out}
echo "=== check"; timeout 150 python3 -m gpulab check rope_rmsnorm --file kernels/rope_rmsnorm.py --json > "$OUT/check_rope_rmsnorm.json"
python3 -c "import json; r=json.load(open('$OUT/check_rope_rmsnorm.json')); print(r['status'], r['summary'])"
echo "=== bench"; timeout 100 python3 -m gpulab bench rope_rmsnorm --json "$OUT/bench_rope.json" 2>&1 | grep -v "^  " | tail -12
echo "=== pick"; timeout 60 python3 - <<'P'
import importlib.util, torch
spec = importlib.util.spec_from_file_location("r", "kernels/rope_rmsnorm.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
for B in (1, 4):
    x = torch.randn(B, 16384, 32, 128, device="cuda", dtype=torch.bfloat16)
    ang = torch.randn(16384, 64, device="cuda"); w = torch.randn(128, device="cuda", dtype=torch.bfloat16)
    m.rmsnorm_rope(x, w, ang.cos(), ang.sin())
    print(B, m._fwd_tuned.best_config)
P
echo "=== probe"; timeout 90 python3 scripts/rope_probe.py "$OUT/rope_probe.json" 2>&1 | tail -8
echo "=== softmax launch profile"; timeout 60 python3 - <<'P' 2>&1 | head -45
import cProfile, pstats, sys, torch
sys.path.insert(0, ".")
from kernels import softmax_smem as m
x = torch.randn(2048, 32768, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
for _ in range(5): m.launch(x, y, slots=12, chunk_rows=32, num_warps=8)
torch.cuda.synchronize()
pr = cProfile.Profile(); pr.enable()
for _ in range(200): m.launch(x, y, slots=12, chunk_rows=32, num_warps=8)
pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
P
