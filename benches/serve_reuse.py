#!/usr/bin/env python3
"""Second-turn time to first token with a shared prefix, cached vs uncached (issue 33).

    python3 benches/serve_reuse.py MODEL.gguf|builtin [--prefix 4096] [--bin target/release/fathom]

Starts `fathom serve -m MODEL --ctx prefix+64` and sends, as token ids to /v1/completions
(max_tokens 1, so the time is the prompt's): A = a random `--prefix`-token prompt (uncached),
B = A plus 16 more tokens (the second turn: only 16 evaluated), then C = another random prompt
of the same length plus 16 tokens on a server restarted with --cache-ram 0 (uncached second
turn). Prints one Markdown row with the three times and the cached-token counts.
"""
import argparse
import http.client
import json
import random
import time

from serve_common import start_server


def start(args, extra):
    model = ["-m", args.model] if args.model != "builtin" else []
    return start_server([args.bin, "serve", *model, "--port", "0", "--ctx",
                         str(args.prefix + 64)] + extra)


def complete(addr, ids):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": ids, "max_tokens": 1,
              "temperature": 0}), headers={"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    dt = time.perf_counter() - t0
    return dt, r["usage"]["prompt_tokens_details"]["cached_tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prefix", type=int, default=4096)
    ap.add_argument("--bin", default="target/release/fathom")
    args = ap.parse_args()
    rng = random.Random(1)
    vocab = 1000  # low ids exist in every vocabulary
    a = [rng.randrange(2, vocab) for _ in range(args.prefix)]
    b = a + [rng.randrange(2, vocab) for _ in range(16)]
    p, addr = start(args, [])
    try:
        ta, ca = complete(addr, a)
        tb, cb = complete(addr, b)
    finally:
        p.terminate()
        p.wait()
    p, addr = start(args, ["--cache-ram", "0"])
    try:
        c = [rng.randrange(2, vocab) for _ in range(args.prefix + 16)]
        tc, cc = complete(addr, c)
    finally:
        p.terminate()
        p.wait()
    print("| prefix | first turn s | second turn, cached s (cached tokens) | second turn, uncached s (cached) |")
    print("|---:|---:|---:|---:|")
    print(f"| {args.prefix} | {ta:.2f} | {tb:.2f} ({cb}) | {tc:.2f} ({cc}) |")


if __name__ == "__main__":
    main()
