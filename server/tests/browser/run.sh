#!/usr/bin/env bash
# The chat page in a real headless browser: starts `fathom serve` (built-in model) on a free
# port and runs check_page.mjs. Needs Debian's chromium (`apt-get install chromium`), Node.js
# and npm (playwright-core is installed here by npm). Usage:
#   server/tests/browser/run.sh [path/to/fathom] [screenshot.png]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-target/release/fathom}
shot=${2:-}
(cd "$here" && npm install --no-audit --no-fund --silent)
log=$(mktemp)
"$bin" serve --port 0 --default-max-tokens 48 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  addr=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1 || true)
  [ -n "$addr" ] && break
  sleep 0.2
done
[ -n "${addr:-}" ] || { cat "$log"; echo "the server did not start" >&2; exit 1; }
node "$here/check_page.mjs" "$addr" $shot
