#!/usr/bin/env bash
# fathom vs llama.cpp, side by side in one run, on the same GGUF and thread count.
#
#   benches/compare/compare.sh MODEL.gguf [-t THREADS] [-p 512] [-n 32] [-r 3] [-u 512] [-k 1] [-d 0]
#
# -d N: every test after N tokens already in the cache (llama-bench's and `fathom bench`'s
#   depth; both engines fill it once per test, untimed, and cut back to it before each rep).
# -u is the prompt chunk (ubatch) of both engines; 512 is llama-bench's default n_ubatch.
# -k runs K rounds of (llama.cpp, fathom), alternating, and adds each round's ratio: on a
# machine whose speed drifts between minutes (a shared VM), one pair of runs can put the two
# engines in different phases; the ratio of the pooled means over alternating rounds, with
# the per-round range, is the figure to quote.
#
# First run: builds llama-cpp-python from source with native CPU flags into a virtualenv
# ($FATHOM_COMPARE_VENV, default target/compare-venv; about 8 min on 2 cores). Then runs
# `benches/compare/llama_bench.py` (llama.cpp through its low-level API) and `fathom bench
# --json` one after the other with the same settings, and prints a ratio table.
# Not part of CI. Env: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), FATHOM (a fathom binary),
# FATHOM_ARGS (extra `fathom bench` arguments, e.g. "--repack iq1_s").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: compare.sh MODEL.gguf [-t THREADS] [-p PROMPTS] [-n GENS] [-r REPS]}
shift
threads=2 prompts=512 gens=32 reps=3 ubatch=512 rounds=1 depth=0
while [ $# -gt 0 ]; do
  case $1 in
    -t) threads=$2; shift 2 ;;
    -p) prompts=$2; shift 2 ;;
    -n) gens=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -u) ubatch=$2; shift 2 ;;
    -k) rounds=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
venv=${FATHOM_COMPARE_VENV:-$root/target/compare-venv}
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python $ver with native CPU flags into $venv (about 8 min on 2 cores)" >&2
  python3 -m venv "$venv"
  # On CPUs with AMX, -march=native compiles ggml's AMX matmul, which segfaulted in
  # ggml_backend_amx_mul_mat on every prompt batch on the AMX host measured (a KVM guest;
  # decode ran): build without it there, keeping ggml's other extra buffer types (REPACK).
  noamx=
  if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
    noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    echo "this CPU has AMX: building llama.cpp without it ($noamx)" >&2
  fi
  CFLAGS="$noamx" CXXFLAGS="$noamx" \
  CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "$venv/bin/pip" install --no-binary llama-cpp-python --no-cache-dir "llama-cpp-python==$ver" >&2
fi
fathom=${FATHOM:-}
if [ -z "$fathom" ]; then
  (cd "$root" && cargo build --release -q -p fathom-tools)
  fathom=$root/target/release/fathom
fi
out=$(mktemp -d)
# both engines map the file: read it into the page cache right before each, so that neither
# pays for disk reads the other did not
warm() { cat "$model" >/dev/null; }
for k in $(seq 1 "$rounds"); do
  echo "round $k/$rounds: llama.cpp: $model, $threads threads, ubatch $ubatch, depth $depth" >&2
  warm
  "$venv/bin/python" "$here/llama_bench.py" -m "$model" -t "$threads" -p "$prompts" -n "$gens" -r "$reps" -u "$ubatch" -d "$depth" >"$out/llama.$k.json"
  echo "round $k/$rounds: fathom: $model, $threads threads" >&2
  warm
  "$fathom" bench -m "$model" -t "$threads" -p "$prompts" -n "$gens" -r "$reps" -u "$ubatch" -d "$depth" --membw --json ${FATHOM_ARGS:-} >"$out/fathom.$k.json"
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    return [{(o["n_prompt"], o["n_gen"]): o for o in json.load(open(f"{out}/{name}.{k}.json"))}
            for k in range(1, rounds + 1)]
ll, fa = load("llama"), load("fathom")
def pooled(runs, key):
    xs = [r[key]["avg_ts"] for r in runs if key in r]
    return (statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0) if xs else None
head = "| test | llama.cpp tok/s | fathom tok/s | fathom / llama.cpp | fathom % of DRAM floor |"
if rounds > 1:
    head += " per-round ratios |"
print(head)
print("|---|---:|---:|---:|---:|" + ("---|" if rounds > 1 else ""))
for key in sorted(fa[0], key=lambda k: (k[1], k[0])):
    test = f"pp{key[0]}" if key[0] else f"tg{key[1]}"
    f = pooled(fa, key)
    sd = fa[0][key]["stddev_ts"] if rounds == 1 else f[1]
    floors = [r[key].get("floor_fraction") for r in fa if r[key].get("floor_fraction")]
    fl = f"{100 * statistics.mean(floors):.0f}%" if floors else "-"
    l = pooled(ll, key)
    if l is None:
        print(f"| {test} | - | {f[0]:.2f} ± {sd:.2f} | - | {fl} |")
        continue
    lsd = ll[0][key]["stddev_ts"] if rounds == 1 else l[1]
    row = f"| {test} | {l[0]:.2f} ± {lsd:.2f} | {f[0]:.2f} ± {sd:.2f} | {f[0] / l[0]:.2f}× | {fl} |"
    if rounds > 1:
        ratios = [a[key]["avg_ts"] / b[key]["avg_ts"] for a, b in zip(fa, ll)]
        row += " " + ", ".join(f"{r:.2f}" for r in ratios) + " |"
    print(row)
PY
