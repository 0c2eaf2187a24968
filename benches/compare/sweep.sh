#!/usr/bin/env bash
# Prefill and decode as the context grows: fathom, ik_llama.cpp and llama.cpp, one after the
# other on the same GGUF and thread count, with a dated markdown table.
#
#   benches/compare/sweep.sh MODEL.gguf [-t 2] [-u 512] [-N 32768] [-s 8] [-n 32] [-e fathom,ik,llama] [-o FILE]
#
# Each engine fills one sequence to N tokens a u-token chunk at a time, timing every chunk,
# and times n decode tokens at every s-th chunk from the state there: `fathom bench --sweep`,
# ik_llama.cpp's `llama-sweep-bench` (its own tool for this), and `llama_bench.py --sweep`
# (llama.cpp through llama-cpp-python). The table gives, per measured depth, each engine's
# prefill rate of the chunk at that depth (pp<u> @ depth), its prompt rate so far (what a
# prompt of that length gets: all chunks up to it), and its decode rate there.
#
# -e picks engines (comma separated). At N = 32768 on 2 cores each run takes 10-25 minutes,
# so the engines run once each, not in alternating rounds: read ratios against the memory
# bandwidth measured before each run (printed in the table).
#
# ik_llama.cpp: IK_SWEEP=path/to/llama-sweep-bench, else $IK_DIR (default
# target/ik_llama.cpp, cloned and configured by ik_build.sh, as for compare_ik.sh) is built for target
# `llama-sweep-bench`. IK_ARGS adds arguments (e.g. "-rtr": in llama-sweep-bench a flag, where
# llama-bench takes "-rtr 1"). llama.cpp: the virtualenv
# compare.sh builds ($FATHOM_COMPARE_VENV, default target/compare-venv). FATHOM=path/to/fathom
# skips fathom's build; FATHOM_ARGS adds `fathom bench` arguments. Not part of CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: sweep.sh MODEL.gguf [-t THREADS] [-u UBATCH] [-N TOKENS] [-s STRIDE] [-n GEN] [-e ENGINES] [-o FILE]}
shift
threads=2 ubatch=512 tokens=32768 stride=8 gen=32 engines=fathom,ik,llama outfile=
while [ $# -gt 0 ]; do
  case $1 in
    -t) threads=$2; shift 2 ;;
    -u) ubatch=$2; shift 2 ;;
    -N) tokens=$2; shift 2 ;;
    -s) stride=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    -e) engines=$2; shift 2 ;;
    -o) outfile=$2; shift 2 ;;
    *) echo "sweep.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -r "$model" ] || { echo "sweep.sh: cannot read $model" >&2; exit 2; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
has() { [[ ",$engines," == *",$1,"* ]]; }
fathom=${FATHOM:-}
if [ -z "$fathom" ]; then
  (cd "$root" && cargo build --release -q -p fathom-tools)
  fathom=$root/target/release/fathom
fi
commit=${IK_COMMIT:-8337e4cd3}
. "$here/ik_build.sh"
ik=${IK_SWEEP:-}
if has ik; then
  if [ -z "$ik" ]; then ik=$(ik_tool llama-sweep-bench); fi
  ik=$(cd "$(dirname "$ik")" && pwd)/$(basename "$ik")  # llama-sweep-bench runs elsewhere
fi
venv=${FATHOM_COMPARE_VENV:-$root/target/compare-venv}
if has llama && ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "sweep.sh: no llama-cpp-python in $venv: run benches/compare/compare.sh once to build it" >&2
  exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
warm() { cat "$model" >/dev/null; }
membw() { "$fathom" bench --membw -t "$threads" 2>&1 | tail -1 >"$out/membw.$1"; }
if has fathom; then
  echo "fathom: --sweep $tokens" >&2
  membw fathom; warm
  "$fathom" bench -m "$model" -t "$threads" -u "$ubatch" -n "$gen" --sweep "$tokens" \
    --sweep-stride "$stride" --json ${FATHOM_ARGS:-} >"$out/fathom.json" ||
    { echo "sweep.sh: fathom failed, left out of the table" >&2; rm -f "$out/fathom.json"; }
fi
if has ik; then
  echo "ik_llama.cpp: llama-sweep-bench -c $tokens" >&2
  membw ik; warm
  # in the scratch directory: llama-sweep-bench also writes llama.log to its working directory;
  # a failed run is reported and left out, so the other engines' results are still written
  if (cd "$out" && "$ik" -m "$model" -t "$threads" -c "$tokens" -b "$ubatch" -ub "$ubatch" \
    -n "$gen" --sweep-stride "$stride" --output-format jsonl ${IK_ARGS:-} >"$out/ik.log" 2>&1) &&
    grep -a '^{' "$out/ik.log" >"$out/ik.jsonl"; then :; else
    echo "sweep.sh: ik_llama.cpp failed, left out of the table; the end of its output:" >&2
    tail -20 "$out/ik.log" >&2
    rm -f "$out/ik.jsonl"
  fi
fi
if has llama; then
  echo "llama.cpp: llama_bench.py --sweep $tokens" >&2
  membw llama; warm
  "$venv/bin/python" "$here/llama_bench.py" -m "$model" -t "$threads" -u "$ubatch" -n "$gen" \
    --sweep "$tokens" --sweep-stride "$stride" >"$out/llama.json" ||
    { echo "sweep.sh: llama.cpp failed, left out of the table" >&2; rm -f "$out/llama.json"; }
fi
fcommit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$model" "$threads" "$ubatch" "$tokens" "$gen" "$commit" "$fcommit" "${FATHOM_ARGS:-}" "${IK_ARGS:-}" >"$out/table.md" <<'PY'
import json, os, sys
out, model, threads, ub, tokens, gen, ikc, fc, fargs, ikargs = sys.argv[1:]
rows = {}
def add(engine, depth, pp, prompt, tg):
    rows.setdefault(depth, {})[engine] = (pp, prompt, tg)
p = f"{out}/fathom.json"
if os.path.exists(p):
    for r in json.load(open(p)):
        add("fathom", r["n_depth"], r["speed_pp"], r["speed_prompt"], r["speed_tg"])
p = f"{out}/ik.jsonl"
if os.path.exists(p):
    # ik times only the measured chunks: its prompt rate so far counts each measured chunk's
    # time for the chunks since the last measured one (≈, exact at stride 1)
    total, last = 0.0, None
    for line in open(p):
        r = json.loads(line)
        if r["n_kv"] >= int(tokens):
            break  # ik rounds its context up (to 256): rows past N
        chunks = 1 if last is None else (r["n_kv"] - last) // int(ub)
        total += r["t_pp"] * chunks
        last = r["n_kv"]
        add("ik", r["n_kv"], r["speed_pp"], (r["n_kv"] + r["pp"]) / total, r["speed_tg"])
p = f"{out}/llama.json"
if os.path.exists(p):
    for r in json.load(open(p)):
        add("llama", r["n_depth"], r["speed_pp"], r["speed_prompt"], r["speed_tg"])
engines = [e for e in ("fathom", "ik", "llama") if any(e in v for v in rows.values())]
names = {"fathom": "fathom", "ik": "ik_llama.cpp", "llama": "llama.cpp"}
bw = {e: open(f"{out}/membw.{e}").read().strip() for e in engines if os.path.exists(f"{out}/membw.{e}")}
print(f"Model `{os.path.basename(model)}`, {threads} threads, {ub}-token chunks to {tokens} tokens, "
      f"tg{gen} at each measured depth. fathom `{fc}`{(' ' + fargs) if fargs else ''}; "
      f"ik_llama.cpp `{ikc}` `llama-sweep-bench`{(' ' + ikargs) if ikargs else ''}; llama.cpp: llama-cpp-python.")
print()
for e in engines:
    print(f"- before {names[e]}: {bw.get(e, '-')}")
print()
f = lambda x: "-" if x is None else f"{x:.2f}"
ratio = lambda a, b: "-" if a is None or b is None or b == 0 else f"{a / b:.2f}×"
head = ["depth"] + [f"pp{ub} {names[e]}" for e in engines]
head += [f"prompt so far {names[e]}" + (" (≈)" if e == "ik" else "") for e in engines]
head += [f"tg{gen} {names[e]}" for e in engines]
if "fathom" in engines:
    head += [f"pp fathom / {names[e]}" for e in engines if e != "fathom"]
    head += [f"prompt fathom / {names[e]}" for e in engines if e != "fathom"]
    head += [f"tg fathom / {names[e]}" for e in engines if e != "fathom"]
print("| " + " | ".join(head) + " |")
print("|" + "---:|" * len(head))
for d in sorted(rows):
    v = rows[d]
    get = lambda e, i: v[e][i] if e in v else None
    cells = [str(d)] + [f(get(e, 0)) for e in engines]
    cells += [f(get(e, 1)) for e in engines]
    cells += [f(get(e, 2)) for e in engines]
    if "fathom" in engines:
        cells += [ratio(get("fathom", 0), get(e, 0)) for e in engines if e != "fathom"]
        cells += [ratio(get("fathom", 1), get(e, 1)) for e in engines if e != "fathom"]
        cells += [ratio(get("fathom", 2), get(e, 2)) for e in engines if e != "fathom"]
    print("| " + " | ".join(cells) + " |")
PY
cat "$out/table.md"
if [ -n "$outfile" ]; then
  {
    echo "# Sweep to $tokens tokens: $(date -u +%F)"
    echo
    echo "Host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs."
    echo
    cat "$out/table.md"
  } >"$outfile"
  echo "wrote $outfile" >&2
fi
