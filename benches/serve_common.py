"""What the `fathom serve` benchmarks share: starting the server and waiting for its address."""
import re
import subprocess
import sys
import time


def start_server(cmd, timeout=None):
    """Run `cmd` (a `fathom serve --port 0 ...` command line) and return (process, "host:port")
    once it prints the address it listens on (within `timeout` seconds; None: however long a
    large model takes to load); exit with a message if it does not start."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = None if timeout is None else time.time() + timeout
    while deadline is None or time.time() < deadline:
        line = p.stderr.readline()
        m = re.search(r"on http://([0-9.]+:[0-9]+)", line)
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            break
    p.kill()
    sys.exit("the server did not start")
