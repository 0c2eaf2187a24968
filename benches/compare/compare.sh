#!/usr/bin/env bash
# fathom vs llama.cpp, side by side in one run, on the same GGUF and thread count.
#
#   benches/compare/compare.sh MODEL.gguf [-t THREADS] [-p 512] [-n 32] [-r 3] [-u 512]
#
# -u is the prompt chunk (ubatch) of both engines; 512 is llama-bench's default n_ubatch.
#
# First run: builds llama-cpp-python from source with native CPU flags into a virtualenv
# ($FATHOM_COMPARE_VENV, default target/compare-venv; about 8 min on 2 cores). Then runs
# `benches/compare/llama_bench.py` (llama.cpp through its low-level API) and `fathom bench
# --json` one after the other with the same settings, and prints a ratio table.
# Not part of CI. Env: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), FATHOM (a fathom binary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: compare.sh MODEL.gguf [-t THREADS] [-p PROMPTS] [-n GENS] [-r REPS]}
shift
threads=2 prompts=512 gens=32 reps=3 ubatch=512
while [ $# -gt 0 ]; do
  case $1 in
    -t) threads=$2; shift 2 ;;
    -p) prompts=$2; shift 2 ;;
    -n) gens=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -u) ubatch=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
venv=${FATHOM_COMPARE_VENV:-$root/target/compare-venv}
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python $ver with native CPU flags into $venv (about 8 min on 2 cores)" >&2
  python3 -m venv "$venv"
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
echo "llama.cpp: $model, $threads threads, ubatch $ubatch" >&2
warm
"$venv/bin/python" "$here/llama_bench.py" -m "$model" -t "$threads" -p "$prompts" -n "$gens" -r "$reps" -u "$ubatch" >"$out/llama.json"
echo "fathom: $model, $threads threads" >&2
warm
"$fathom" bench -m "$model" -t "$threads" -p "$prompts" -n "$gens" -r "$reps" -u "$ubatch" --membw --json >"$out/fathom.json"
python3 - "$out/llama.json" "$out/fathom.json" <<'PY'
import json, sys
ll = {(o["n_prompt"], o["n_gen"]): o for o in json.load(open(sys.argv[1]))}
fa = {(o["n_prompt"], o["n_gen"]): o for o in json.load(open(sys.argv[2]))}
print("| test | llama.cpp tok/s | fathom tok/s | fathom / llama.cpp | fathom % of DRAM floor |")
print("|---|---:|---:|---:|---:|")
for k in sorted(fa, key=lambda k: (k[1], k[0])):
    f = fa[k]
    l = ll.get(k)
    test = f"pp{k[0]}" if k[0] else f"tg{k[1]}"
    floor = f.get("floor_fraction")
    fl = f"{100 * floor:.0f}%" if floor else "-"
    if l:
        print(f"| {test} | {l['avg_ts']:.2f} ± {l['stddev_ts']:.2f} | {f['avg_ts']:.2f} ± {f['stddev_ts']:.2f} | {f['avg_ts'] / l['avg_ts']:.2f}× | {fl} |")
    else:
        print(f"| {test} | - | {f['avg_ts']:.2f} ± {f['stddev_ts']:.2f} | - | {fl} |")
PY
