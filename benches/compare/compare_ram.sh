#!/usr/bin/env bash
# A model larger than RAM, at the same memory for every engine: fathom with its expert cache
# (`--ram B`), fathom on its memory map (`--ram off`) and llama.cpp on its memory map, side by
# side in one sitting, for each memory figure B.
#
#   benches/compare/compare_ram.sh MODEL [-b 8,12,16] [-t 2] [-p 512] [-n 16] [-r 1]
#                                  [-e cache,mmap,llama] [-o docs/perf/DATE-issue34-ram.md]
#
# MODEL is a .gguf or an official checkpoint's directory (`-e cache,mmap`: llama.cpp does not
# read checkpoints; fathom `--ram off` then uses the FP4 experts in place from the shards).
#
# "The same memory": before each figure B a balloon process holds touched anonymous memory
# (no swap here, so it stays resident) until the memory available is B + 0.25 GiB; every
# engine then runs with what is left. Before every run the model file's cached pages are
# dropped (posix_fadvise DONTNEED), so no engine starts from pages another one read. Peak RSS
# comes from /usr/bin/time. llama.cpp is llama-cpp-python's build from compare.sh
# ($FATHOM_COMPARE_VENV, default target/compare-venv; run compare.sh once to build it).
# Not part of CI: one figure takes 5–15 minutes on a 30 GiB file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: compare_ram.sh MODEL.gguf [-b 8,12,16] [-t 2] [-p 512] [-n 16] [-r 1] [-o OUT]}
shift
budgets=8,12,16 threads=2 prompts=512 gens=16 reps=1 outfile= engines=cache,mmap,llama
while [ $# -gt 0 ]; do
  case $1 in
    -b) budgets=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) prompts=$2; shift 2 ;;
    -n) gens=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -o) outfile=$2; shift 2 ;;
    -e) engines=$2; shift 2 ;;
    *) echo "compare_ram.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
venv=${FATHOM_COMPARE_VENV:-$root/target/compare-venv}
"$venv/bin/python" -c "import llama_cpp" 2>/dev/null || {
  echo "no llama-cpp-python in $venv: run benches/compare/compare.sh once to build it" >&2; exit 1; }
fathom=${FATHOM:-}
if [ -z "$fathom" ]; then
  (cd "$root" && cargo build --release -q -p fathom-tools)
  fathom=$root/target/release/fathom
fi
out=$(mktemp -d)
balloon_pid=
cleanup() { [ -n "$balloon_pid" ] && kill "$balloon_pid" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT

avail_kib() { awk '/^MemAvailable:/ {print $2}' /proc/meminfo; }
# drops the cached pages of the model file (every file of a checkpoint directory)
drop() {
  python3 -c "
import os, sys
p = sys.argv[1]
for f in ([os.path.join(p, n) for n in os.listdir(p)] if os.path.isdir(p) else [p]):
    if os.path.isfile(f):
        fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$model"
}
# holds MiB of touched memory until killed; prints nothing
balloon() {
  python3 -c "
import sys, time
n = int(sys.argv[1]); held = []
while n > 0:
    m = min(n, 256); held.append(b'\x01' * (m << 20)); n -= m
open(sys.argv[2], 'w').write('ready')
time.sleep(1e6)" "$1" "$out/ready" &
  balloon_pid=$!
  while [ ! -s "$out/ready" ]; do sleep 0.5; done
}
peak_gib() { awk -F: '/Maximum resident set size/ {printf "%.2f", $2/1048576}' "$1"; }

membw=$("$fathom" bench --membw -t "$threads" 2>/dev/null | sed -n 's/memory bandwidth: \([0-9.]*\).*/\1/p')
diskbw=$("$fathom" bench --diskbw -m "$model" 2>/dev/null | sed -n 's/disk read: \([0-9.]*\).*/\1/p')
size=$(du -BG --apparent-size "$model" | cut -f1)
commit=$(cd "$root" && git rev-parse --short HEAD)
{
  echo "# $(date -u +%F): a model larger than RAM, at the same memory"
  echo
  echo "Host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB;"
  echo "memory read $membw GB/s (\`fathom bench --membw -t $threads\`), disk read $diskbw GB/s"
  echo "(\`--diskbw\`, O_DIRECT). Model \`$(basename "$model")\` ($size). fathom \`$commit\`,"
  echo "llama.cpp from llama-cpp-python $("$venv/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)')."
  echo "\`-t $threads -p $prompts -n $gens -r $reps\`; each figure: a balloon leaves that much memory available,"
  echo "the file's cached pages are dropped before every run."
  echo
  echo "| memory | engine | pp$prompts t/s | tg$gens t/s | peak RSS GiB | expert hits (tg) | MiB read/token (tg) | disk GB/s (tg) | GB/s while reading (tg) | guesses used (tg) |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$out/table.md"

for b in ${budgets//,/ }; do
  [ -n "$balloon_pid" ] && { kill "$balloon_pid"; wait "$balloon_pid" 2>/dev/null || true; balloon_pid=; }
  rm -f "$out/ready"
  drop
  sleep 2
  hold=$(( ($(avail_kib) / 1024) - b * 1024 - 256 ))
  if [ "$hold" -gt 0 ]; then balloon "$hold"; fi
  echo "memory $b GiB: $(( $(avail_kib) / 1024 )) MiB available" >&2
  for engine in ${engines//,/ }; do
    drop
    case $engine in
      cache|mmap)
        ram=$([ $engine = cache ] && echo "$b" || echo off)
        /usr/bin/time -v -o "$out/time" "$fathom" bench -m "$model" -t "$threads" -p "$prompts" \
          -n "$gens" -r "$reps" --ram "$ram" --json >"$out/run.json" 2>"$out/err" || {
          echo "fathom --ram $ram failed:" >&2; tail -3 "$out/err" >&2; continue; }
        row=$(python3 -c "
import json, sys
v = json.load(open(sys.argv[1]))
pp = next((r['avg_ts'] for r in v if r['n_prompt'] > 0), float('nan'))
tg = next((r for r in v if r['n_gen'] > 0), None)
c = (tg or {}).get('expert_cache')
ex = f\"{100*c['hit_rate']:.1f}% | {c['bytes_read_per_token']/2**20:.1f} | {c['disk_gbs']:.2f} | {c['busy_gbs']:.2f} | {100*c['guess_used']/max(c['guessed'],1):.0f}%\" if c else '– | – | – | – | –'
print(f\"{pp:.2f} | {tg['avg_ts'] if tg else float('nan'):.2f} | PEAK | {ex}\")" "$out/run.json")
        name=$([ $engine = cache ] && echo "fathom \`--ram $b\`" || echo "fathom \`--ram off\` (mmap)")
        ;;
      llama)
        /usr/bin/time -v -o "$out/time" "$venv/bin/python" "$here/llama_bench.py" -m "$model" \
          -t "$threads" -p "$prompts" -n "$gens" -r "$reps" >"$out/run.json" 2>"$out/err" || {
          echo "llama.cpp failed:" >&2; tail -3 "$out/err" >&2; continue; }
        row=$(python3 -c "
import json, sys
v = json.load(open(sys.argv[1]))
pp = next((r['avg_ts'] for r in v if r['n_prompt'] > 0), float('nan'))
tg = next((r['avg_ts'] for r in v if r['n_gen'] > 0), float('nan'))
print(f'{pp:.2f} | {tg:.2f} | PEAK | – | – | – | – | –')" "$out/run.json")
        name="llama.cpp (mmap)"
        ;;
    esac
    row=${row/PEAK/$(peak_gib "$out/time")}
    echo "| $b GiB | $name | $row |" | tee -a "$out/table.md" >&2
  done
done
cat "$out/table.md"
if [ -n "$outfile" ]; then cp "$out/table.md" "$outfile"; echo "wrote $outfile" >&2; fi
