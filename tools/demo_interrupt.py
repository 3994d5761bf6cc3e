"""Interrupt a command for real, as Ctrl-C would: start it, send SIGINT when a line containing
``--at TEXT`` appears on its stderr, and show everything it wrote. Exit code: the command's (130
when the interrupt took).

    python3 tools/demo_interrupt.py --at "candidate 2 (model, round 2): checking" -- python3 -m porter port ...
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    sent = False
    for line in proc.stderr:
        sys.stdout.write(line)
        sys.stdout.flush()
        if not sent and args.at in line:
            proc.send_signal(signal.SIGINT)
            sent = True
            print(f"[demo: SIGINT sent to {proc.pid}, as Ctrl-C would]", flush=True)
    sys.stdout.write(proc.stdout.read())
    code = proc.wait()
    if not sent:
        print(f"[demo: {args.at!r} never appeared; nothing was interrupted]")
    print(f"[exit {code}]")
    return code


if __name__ == "__main__":
    sys.exit(main())
