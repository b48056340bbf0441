#!/usr/bin/env bash
# One device call: environment, the softmax check natively, timing validation.
# Usage on the GPU machine: bash scripts/tools/gpu_session.sh STEP...  (writes under $OUT)
# e.g. fa3:stress fa3:chosen sweep-softmax:--only=smem bench steps
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 GPULAB_HOME=/tmp/gpulab-ws
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
for step in "$@"; do
  echo "=== $step"
  case "$step" in
    softmax)
      python3 -m gpulab check softmax --file kernels/softmax.py --json > "$OUT/softmax_ref.json"; echo "rc=$?"
      python3 -c "import json; r=json.load(open('$OUT/softmax_ref.json')); print(r['summary']); [print(c['shape'], c['dtype'], round(c['ms']*1e3,1), 'us', round(c['throughput']), c['unit'], round(c['roofline_fraction'],3), 'x%.2f' % c['speedup']) for c in (r.get('timing') or {}).get('cases', [])]"
      python3 -m gpulab check softmax --file exercises/softmax.py --no-timing | head -3; echo "rc=$?"
      ;;
    trusted:*) timeout 330 python3 scripts/tools/trusted_grading_gpu.py "$OUT/trusted_$(echo "${step#trusted:}" | tr + _).json" $(echo "${step#trusted:}" | tr + " ") 2>&1 | grep -v Warning ;;
    trusted) timeout 330 python3 scripts/tools/trusted_grading_gpu.py "$OUT/trusted.json" 2>&1 | grep -v Warning ;;
    explain) timeout 420 python3 scripts/research/explain_gpu.py "$OUT/explain_gpu.json" 2>&1 | tail -30 ;;
    nsight) timeout 560 python3 scripts/research/nsight_gpu.py "$OUT/nsight" 2>&1 | grep -v Warning | tail -30 ;;
    explain:*) exs=${step#explain:}  # e.g. explain:softmax,bandwidth (a part that fits one call)
      timeout 540 python3 scripts/research/explain_gpu.py "$OUT/explain_gpu_$(echo "$exs" | tr , _).json" "$exs" --jobs "${EXPLAIN_JOBS:-1}" 2>&1 | tail -30 ;;
    hopper-off:*) ex=${step#hopper-off:}  # the portable paths, as on an A100 or a T4
      timeout 200 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --off fa3 --off softmax_smem --off matmul_tma --json > "$OUT/hopper_off_$ex.json"; echo "rc=$?"
      python3 -c "import json; r=json.load(open('$OUT/hopper_off_$ex.json')); print(r['status'], r['summary'])" ;;
    replay-check:*) ex=${step#replay-check:}  # issue 27: graded from the replay's times (GPULAB_GPU_REPLAY=1)
      # Both ways, with the Hopper paths off (the replay keeps the file's own
      # kernels only; hopper/'s Gluon ones are not kept yet), then on.
      # REPLAY_ONLY=hopper (or portable) runs one of the two.
      for off in "--off fa3 --off softmax_smem --off matmul_tma" ""; do
        tag=$([ -n "$off" ] && echo portable || echo hopper)
        [ -n "${REPLAY_ONLY:-}" ] && [ "$REPLAY_ONLY" != "$tag" ] && continue
        GPULAB_GPU_REPLAY=1 timeout "${REPLAY_BUDGET:-240}" python3 -m gpulab check "$ex" --file "kernels/$ex.py" $off --json > "$OUT/replay_${tag}_$ex.json"; echo "rc=$?"
        python3 -c "import json; r=json.load(open('$OUT/replay_${tag}_$ex.json')); t=r.get('timing') or {}; print('$tag', r['status'], r['summary']); [print(' ', c.get('name'), c.get('ms'), 'claimed', c.get('claimed_ms')) for c in t.get('cases', [])]" 2>&1 | tail -12
      done ;;
    timing) python3 scripts/tools/validate_timing.py "$OUT/timing_validation.json" ;;
    pytest-gpu) python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts="" tests 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -40 ;;
    pytest-gpu:*) timeout "${PYTEST_BUDGET:-300}" python3 -m pytest -q -m gpu --durations=15 -p no:cacheprovider -o addopts="" $(echo "${step#pytest-gpu:}" | tr + " ") 2>&1 | tee -a "$OUT/pytest_gpu.txt" | tail -40 ;;
    probe) python3 -m gpulab probe; python3 -m gpulab probe --json > "$OUT/probe.json" ;;
    microbench) python3 -m gpulab probe --bench --quick 2>&1 | tail -40; cp /tmp/gpulab-ws/.gpulab/ceilings/*.json "$OUT/" 2>/dev/null ;;
    sweep-softmax) python3 scripts/sweeps/sweep_softmax.py "$OUT/softmax_sweep.json" 2>&1 | grep -v Warning ;;
    sweep-softmax:*) timeout 300 python3 scripts/sweeps/sweep_softmax.py "$OUT/softmax_sweep.json" $(echo "${step#sweep-softmax:}" | tr + " ") 2>&1 | grep -v Warning ;;
    softmax-ring) timeout 300 python3 scripts/research/softmax_ring_probe.py "$OUT/softmax_ring_probe.json" 2>&1 | grep -v Warning ;;
    softmax-launch) timeout 120 python3 scripts/research/softmax_launch_cost.py 2>&1 | grep -v Warning | tee "$OUT/softmax_launch_cost.txt" ;;
    fa3:*) timeout 300 python3 scripts/research/fa3_probe.py --"${step#fa3:}" 2>&1 | cut -c1-300 ;;
    bench:*) ks=$(echo "${step#bench:}" | tr + " "); python3 -m gpulab bench $ks --json "$OUT/bench_$(echo "$ks" | tr " " _).json" 2>&1 | grep -v "  …" | tail -60 ;;
    snippets) # issue 47: the lessons' ```python run blocks natively on this GPU (CI runs them in the interpreter)
      timeout 300 python3 -c "
import json, pathlib, sys, tempfile
from tests.course.test_lesson_snippets import INTERPRET, run_child, write_blocks
tmp = pathlib.Path(tempfile.mkdtemp())
files = write_blocks(tmp)
rows = [dict(r, block=files[r['file']]) for r in run_child(INTERPRET, list(files), interpret=False)]
json.dump(rows, open('$OUT/snippets.json', 'w'), indent=1)
for r in rows: print('ok  ' if r['ok'] else 'FAIL', r['block'], (r.get('error') or '').strip().splitlines()[-1:] )
sys.exit(0 if rows and all(r['ok'] for r in rows) else 1)"; echo "rc=$?" ;;
    issue47:*) part=${step#issue47:}  # issue 47: the puzzles and matmul_ceiling (steps) or the letters before/after the probe (bands)
      timeout 530 python3 scripts/tools/issue47_gpu.py "$OUT/issue47_$part.json" "$part" 2>&1 | grep -v Warning | cut -c1-400; echo "rc=${PIPESTATUS[0]}" ;;
    devcheck) timeout 240 python3 -m gpulab dev check --device cuda 2>&1 | tail -20 ;;
    bench) timeout 330 python3 -m gpulab bench --json "$OUT/h200.json" 2>&1 | grep -v "^  " | tail -70 ;;
    check:*) ex=${step#check:}; timeout 200 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/check_$ex.json"; echo "rc=$?"
      python3 -c "import json; r=json.load(open('$OUT/check_$ex.json')); print(r['status'], r['summary']); print(r.get('message','')[-1500:]); print(*r.get('notes', []), sep=chr(10))" ;;
    steps) # every lesson step: the reference passes, the starter fails (issue 29)
      for ex in $(python3 -c "from gpulab.course.content import load_course; print(*(e.exercise for e in load_course().exercises if e.is_step))"); do
        timeout 200 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/step_$ex.json"; rc=$?
        python3 -c "import json; r=json.load(open('$OUT/step_$ex.json')); print('$ex reference rc=$rc', r['status'], r['summary']); [print('  ', c['name'], c.get('detail', '')) for c in r.get('cases', []) if not c['passed']]"
        timeout 200 python3 -m gpulab check "$ex" --file "exercises/$ex.py" --no-timing --json > "$OUT/step_${ex}_starter.json"; echo "$ex starter rc=$? (1 expected)"
      done ;;
    fast:*) ex=${step#fast:}; timeout 120 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --no-timing | head -4 ;;
    sweep-matmul:*|sweep-attention:*) name=${step%%:*}; name=${name#sweep-}; args=$(echo "${step#*:}" | tr + " ")
      timeout 560 python3 scripts/sweeps/sweep_$name.py "$OUT/${name}_sweep.json" $args 2>&1 | tail -60 ;;
    sweep-matmul) timeout 150 python3 scripts/sweeps/sweep_matmul.py "$OUT/matmul_sweep.json" --quick --budget 100 2>&1 | tail -30 ;;
    sweep-attention) timeout 150 python3 scripts/sweeps/sweep_attention.py "$OUT/attention_sweep.json" --quick --budget 100 2>&1 | tail -30 ;;
    rope:*) timeout 300 python3 scripts/research/rope_probe.py "$OUT/rope_probe.json" "${step#rope:}" 2>&1 | grep -v Warning | cut -c1-900 ;;
    same-size) timeout 300 python3 scripts/research/same_size_ceilings.py "$OUT/same_size_ceilings.json" 2>&1 | grep -v Warning ;;
    ncu:*) for c in $(echo "${step#ncu:}" | tr + " "); do echo "### $c" >> "$OUT/ncu.csv"
        timeout 240 ncu --profile-from-start off --clock-control none --set full \
          --metrics "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
          --csv --page details python3 scripts/tools/ncu_cases.py "$c" >> "$OUT/ncu.csv" 2>> "$OUT/ncu_err.txt"; echo "$c rc=$?"; done
      grep -h "==ERROR==\|==WARNING==" "$OUT/ncu.csv" "$OUT/ncu_err.txt" | sort | uniq -c | head
      python3 scripts/tools/ncu_summary.py "$OUT/ncu.csv" "$OUT/ncu_summary.json" | cut -c1-1500 ;;
    feedback:*) exs=$(echo "${step#feedback:}" | tr + " ")  # issue 32: a learner's wait
      timeout "${FEEDBACK_BUDGET:-400}" python3 scripts/tools/feedback_bench.py "$OUT/feedback_h200${FEEDBACK_TAG:-}.json" $exs --think 10 ${FEEDBACK_ARGS:-} 2>&1 | grep -v Warning | cut -c1-400 ;;
    early-compare:*) exs=$(echo "${step#early-compare:}" | tr + " ")  # issue 32: the held spare's slow correctness
      for mode in off on; do timeout "${FEEDBACK_BUDGET:-200}" python3 scripts/tools/feedback_bench.py "$OUT/feedback_early_$mode.json" $exs --think 10 --learner --early $mode 2>&1 | grep -v Warning | cut -c1-300; done
      OMP_NUM_THREADS=$(( $(nproc) - 2 )) timeout "${FEEDBACK_BUDGET:-200}" python3 scripts/tools/feedback_bench.py "$OUT/feedback_early_on_omp.json" $exs --think 10 --learner --early on 2>&1 | grep -v Warning | cut -c1-300 ;;
    refusal:*) spec=${step#refusal:}; secs=${spec%%:*}; exs=""; [ "$spec" != "$secs" ] && exs=$(echo "${spec#*:}" | tr + " ")
      timeout $((secs + 150)) python3 scripts/tools/refusal_runs.py "$OUT/refusal_${secs}s.json" $exs --deadline "$secs" --device cuda ${REFUSAL_ARGS:-} 2>&1 | grep -v Warning | cut -c1-300 ;;
    spare) timeout 200 python3 scripts/tools/spare_ready.py "$OUT/spare_ready_h200.json" --device cuda --repeat "${SPARE_REPEAT:-3}" 2>&1 | grep -v Warning | tail -8 ;;
    grade-bench) # issue 46: `gpulab grade run` on the GPU(s): students per hour per GPU (timed, the reference beside)
      timeout "$(( ${GRADE_BUDGET:-420} + 90 ))" python3 scripts/tools/grade_bench.py "$OUT/grade_bench_gpu.json" --device cuda \
        --students "${GRADE_STUDENTS:-24}" --exercises "${GRADE_EXERCISES:-softmax,rope_rmsnorm}" --budget "${GRADE_BUDGET:-420}" 2>&1 | tail -5 ;;
    prove) timeout "${PROVE_BUDGET:-220}" python3 scripts/tools/prove_course.py "$OUT/prove_course.json" --jobs 6 --device cuda 2>&1 | grep -v Warning | cut -c1-400 ;;
    judge-vs-bench:*) ex=${step#judge-vs-bench:}  # the same ceilings on both sides
      timeout 120 python3 -m gpulab probe --bench --quick 2>&1 | tail -8
      timeout 120 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/judge_$ex.json"; echo "check rc=$?"
      python3 -c "import json; r=json.load(open('$OUT/judge_$ex.json')); print(r['summary']); [print(c['shape'], round(c['ms']*1e3,1), 'us', round(c.get('roofline_fraction') or 0,3), c.get('ceiling'), 'x%.2f' % (c.get('speedup') or 0)) for c in (r.get('timing') or {}).get('cases', [])]"
      timeout 150 python3 -m gpulab bench "$ex" --json "$OUT/bench_$ex.json" 2>&1 | grep -v "  …" | tail -14 ;;
    cubin-probe|cubin-probe:*) exs=""; [ "$step" != cubin-probe ] && exs=$(echo "${step#cubin-probe:}" | tr + " ")  # issue 44
      timeout "${PROBE_BUDGET:-300}" python3 scripts/research/cubin_replay_probe.py "$OUT/cubin_replay_probe.json" $exs 2>&1 | grep -v Warning | cut -c1-900 ;;
    pyspy:*) ex=${step#pyspy:}  # issue 44: where a check's time goes (py-spy carried in .whl, replay on then off)
      python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .whl/py_spy-*.whl >/dev/null 2>&1
      for rp in 1 0; do GPULAB_GPU_REPLAY=$rp timeout "${PYSPY_BUDGET:-150}" /tmp/pyspy/bin/py-spy record --subprocesses --rate 50 --format speedscope \
          -o "$OUT/pyspy_${ex}_replay$rp.json" -- python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/pyspy_check_${ex}_replay$rp.json" 2> "$OUT/pyspy_err_$rp.txt"; echo "replay=$rp rc=$?"
        python3 -c "import json; r=json.load(open('$OUT/pyspy_check_${ex}_replay$rp.json')); print(r['summary']); print('stages', r.get('stages')); print('slowest', r.get('slowest'))" 2>&1 | tail -4
        python3 scripts/tools/speedscope_top.py "$OUT/pyspy_${ex}_replay$rp.json" --top 12 2>&1 | cut -c1-160 | head -60
      done ;;
    replay-compare|replay-compare:*) exs=""; [ "$step" != replay-compare ] && exs=$(echo "${step#replay-compare:}" | tr + " ")  # issue 44
      timeout "${COMPARE_BUDGET:-560}" python3 scripts/tools/replay_compare.py "$OUT/replay_compare${COMPARE_TAG:-}.json" $exs --budget "${COMPARE_BUDGET:-540}" 2>&1 | grep -v Warning | cut -c1-400 ;;
    pyspy-feedback:*) exs=$(echo "${step#pyspy-feedback:}" | tr + " ")  # issue 44: the wait, profiled
      python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .whl/py_spy-*.whl >/dev/null 2>&1
      timeout "${FEEDBACK_BUDGET:-400}" /tmp/pyspy/bin/py-spy record --subprocesses --rate 40 --format speedscope -o "$OUT/pyspy_feedback.json" -- \
        python3 scripts/tools/feedback_bench.py "$OUT/feedback${FEEDBACK_TAG:-}.json" $exs --think 10 ${FEEDBACK_ARGS:-} 2>&1 | grep -v "Warning\|py-spy>" | cut -c1-400 ;;
    issue44)  # the GPU proof of issue 44 in one call (~9 min): the replay's GPU tests (the
      # alias that divided the replay's clock, the forged x0.8 claim), then every reference
      # graded with the compiled-kernel replay on and off, within 2 points
      timeout 200 python3 -m pytest -q -m gpu --durations=10 -p no:cacheprovider -o addopts="" \
        tests/judge/test_replay_timing.py tests/judge/test_replay_binaries.py \
        tests/judge/test_trusted_grading.py::test_gpu_with_replay_timing_times_claimed_short_do_not_lift_the_grade \
        2>&1 | tee "$OUT/pytest_issue44.txt" | tail -15
      timeout 400 python3 scripts/tools/replay_compare.py "$OUT/replay_compare_issue44.json" --budget 390 2>&1 | grep -v Warning | cut -c1-300 ;;
    issue47-steps)  # issue 47 part B on the GPU (one call with issue47-tests): the new and changed
      # steps' references pass and starters fail natively (reduce_overhead's judge times the CUDA
      # graphs); then issue47-tests: the GPU tests and `gpulab counters --ncu` on this GPU
      for ex in rope_rmsnorm_bwd rope_rmsnorm reduce_overhead read_counters; do
        timeout 120 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/s47_$ex.json"; rc=$?
        python3 -c "import json; r=json.load(open('$OUT/s47_$ex.json')); print('$ex reference rc=$rc', r['status'], r['summary']); [print('  ', c['name'], c.get('detail', '')[:200]) for c in r.get('cases', []) if not c['passed'] or 'timed' in c['name']]"
        timeout 60 python3 -m gpulab check "$ex" --file "exercises/$ex.py" --no-timing --json > /dev/null; echo "$ex starter rc=$? (1 expected)"
      done ;;
    issue47-tests)
      PYTEST_ARGS="tests/judge/test_reduce_overhead.py tests/judge/test_steps45_grading.py::test_gpu_honest_variants_pass"
      timeout 240 python3 -m pytest -q -m gpu --durations=5 -p no:cacheprovider -o addopts="" $PYTEST_ARGS 2>&1 | tee "$OUT/pytest_s47.txt" | tail -12
      for k in rope_fwd softmax_32k; do timeout 90 python3 -m gpulab counters "$k" --ncu > "$OUT/counters_$k.txt" 2>&1; echo "counters $k --ncu rc=$?"; head -30 "$OUT/counters_$k.txt"; done ;;
    folder-gelu)  # issue 45: a kernel exercise added as one folder, graded, replayed and timed on this GPU
      rm -rf /tmp/fcourse; mkdir -p /tmp/fcourse/lessons; printf 'exercise_folders = ["ex"]\n' > /tmp/fcourse/lessons/manifest.toml
      python3 -m gpulab dev new-exercise gelu --dir /tmp/fcourse/ex | tail -3
      GPULAB_CONTENT=/tmp/fcourse timeout 200 python3 -m gpulab dev check gelu --device cuda 2>&1 | tail -6; echo "dev check rc=$?"
      GPULAB_CONTENT=/tmp/fcourse timeout 200 python3 -m gpulab check gelu --file /tmp/fcourse/ex/gelu/reference.py --json > "$OUT/folder_gelu.json"; echo "check rc=$?"
      python3 -c "import json; r=json.load(open('$OUT/folder_gelu.json')); print(r['status'], r['summary']); print('stages', r.get('stages')); [print(' ', c.get('shape'), c.get('dtype'), c.get('ms'), c.get('claimed_ms'), c.get('roofline_fraction')) for c in (r.get('timing') or {}).get('cases', [])]" ;;
    bench-folder)  # issue 45: `gpulab bench` times a folder exercise (tools edited to say bench) beside spec.py's baseline
      rm -rf /tmp/bcourse; mkdir -p /tmp/bcourse/lessons; printf 'exercise_folders = ["ex"]\n' > /tmp/bcourse/lessons/manifest.toml
      GPULAB_CONTENT=/tmp/bcourse python3 -m gpulab dev new-exercise gelu --dir /tmp/bcourse/ex | tail -3
      sed -i 's/^status = "ready"\(.*\)$/status = "ready"\1\ntools = ["explain", "bench"]/' /tmp/bcourse/ex/gelu/exercise.toml
      grep -n '^tools' /tmp/bcourse/ex/gelu/exercise.toml
      GPULAB_CONTENT=/tmp/bcourse timeout 300 python3 -m gpulab bench gelu --json "$OUT/bench_folder.json" 2>&1 | grep -v "  …" | tail -20; echo "bench rc=${PIPESTATUS[0]}"
      python3 -c "import json; r=json.load(open('$OUT/bench_folder.json')); [print(x['kernel'], x['shape'], x['dtype'], round(x['ms']*1e3,1), 'us', x['baseline'], 'x%.2f' % x['speedup'], x['roofline_fraction']) for x in r['results']]" ;;
    suite-cpu)  # the whole CPU suite on this machine's cores, the GPU hidden (CUDA_VISIBLE_DEVICES=):
      # the image's torch/Triton/JAX, with the lab's own packages carried as wheels in .whl/suite
      python3 --version; python3 -c "import numpy, torch, triton, jax; print('numpy', numpy.__version__, 'jax', jax.__version__)"
      python3 -m pip install -q --no-index --no-deps --target /tmp/suite .whl/suite/*.whl 2>&1 | tail -2
      PYTHONPATH=$PWD:/tmp/suite CUDA_VISIBLE_DEVICES= timeout "${SUITE_BUDGET:-540}" python3 -m pytest -v -n "${SUITE_JOBS:-15}" \
        -p no:cacheprovider -p no:benchmark -W ignore ${SUITE_ARGS:-tests} > "$OUT/suite_cpu.txt" 2>&1; echo "pytest rc=$?"
      grep -E " (FAILED|ERROR) " "$OUT/suite_cpu.txt" | sed -E 's/.* (FAILED|ERROR) //' | sort | head -80
      echo "passed: $(grep -cE " PASSED " "$OUT/suite_cpu.txt")" ;;
    house-gpu)  # issue 45's moves on this GPU: the replay's GPU tests (compiled kernels, its clock),
      # softmax and matmul graded from the replay, and the folder exercise; beside suite-cpu
      # (SUITE_JOBS below the cores), so one call proves both
      ( timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts="" \
          tests/judge/test_replay_timing.py tests/judge/test_replay_binaries.py \
          tests/judge/test_trusted_grading.py::test_gpu_with_replay_timing_times_claimed_short_do_not_lift_the_grade \
          > "$OUT/house_gpu_pytest.txt" 2>&1
        for ex in softmax matmul; do
          timeout 150 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/house_gpu_$ex.json" 2>/dev/null
          python3 -c "import json; r=json.load(open('$OUT/house_gpu_$ex.json')); print('$ex', r['status'], r['summary'])" >> "$OUT/house_gpu.txt" 2>&1
          timeout 100 python3 -m gpulab check "$ex" --file "exercises/$ex.py" --no-timing 2>&1 | tail -2 >> "$OUT/house_gpu.txt"
        done ) &
      gpu_pid=$! ;;
    audit-gpu)  # (about 60 + 300 + 2x80 s: fits one call) the audit's profiler (torch.autograd's since stop 53) sees torch's GPU work; the
      # GPU cheats and graded references through real checks; in the background, beside suite-cpu
      ( timeout 60 python3 scripts/tools/audit_gpu.py > "$OUT/audit_gpu.txt" 2>&1
        timeout "${AUDIT_PYTEST_BUDGET:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts="" --durations=20 \
          tests/judge/test_integrity_all.py tests/judge/test_softmax_grader.py \
          tests/check/test_learner_checks.py tests/judge/test_replay_timing.py \
          > "$OUT/audit_gpu_pytest.txt" 2>&1
        for ex in softmax matmul; do
          timeout 80 python3 -m gpulab check "$ex" --file "kernels/$ex.py" --json > "$OUT/audit_gpu_$ex.json" 2>/dev/null
          python3 -c "import json; r=json.load(open('$OUT/audit_gpu_$ex.json')); print('$ex', r['status'], r['summary'], r.get('stages'))" >> "$OUT/audit_gpu.txt" 2>&1
        done ) &
      gpu_pid=$! ;;
    wait-audit) wait "${gpu_pid:-0}" 2>/dev/null; tail -8 "$OUT/audit_gpu_pytest.txt"; cat "$OUT/audit_gpu.txt" ;;
    wait-gpu) wait "${gpu_pid:-0}" 2>/dev/null; tail -6 "$OUT/house_gpu_pytest.txt"; cat "$OUT/house_gpu.txt" ;;
    *) echo "unknown step $step" ;;
  esac
done
