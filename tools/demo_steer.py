"""Drive ``porter port --interactive`` through a pseudo-terminal with scripted answers, and print
the terminal as a developer would have seen it (their typing included).

    python3 tools/demo_steer.py --answer "h:use wgmma" --answer "e:examples/gemm_bt_tile/kernel_sm90a.ptx" \\
        -- python3 -m porter port K.ptx --to sm_90a --model replay:... --interactive --no-branch

Each ``--answer`` is given at the next prompt, in order: ``h:TEXT`` (a hint), ``e:FILE`` (edit: the
editor replaces the candidate with FILE's text), ``a`` (accept), ``s`` (stop), ``c`` (go on).
When they run out, Enter (go on) is given. Exit code: the command's.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import subprocess
import sys
import tempfile
from pathlib import Path

MENU_END = "s: stop > "


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    answers = list(args.answer)
    with tempfile.TemporaryDirectory() as folder:
        editor = Path(folder) / "editor.py"
        source = Path(folder) / "edit-source"
        editor.write_text(f"import shutil, sys\nshutil.copyfile({str(source)!r}, sys.argv[1])\n")
        env = {**os.environ, "EDITOR": f"{sys.executable} {editor}", "TERM": "dumb", "COLUMNS": "160"}
        master, slave = pty.openpty()
        proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        seen = ""
        hint: str | None = None  # typed once the hint prompt shows
        while True:
            ready, _, _ = select.select([master], [], [], 600)
            if not ready:
                proc.kill()
                break
            try:
                data = os.read(master, 65536).decode(errors="replace")
            except OSError:
                data = ""
            if not data:
                break
            sys.stdout.write(data.replace("\r\n", "\n"))
            sys.stdout.flush()
            seen += data
            if hint is not None and seen.endswith("hint> "):
                os.write(master, (hint + "\n").encode())
                hint, seen = None, ""
            elif seen.rstrip().endswith(MENU_END.rstrip()):
                seen = ""
                answer = answers.pop(0) if answers else "c"
                kind, _, text = answer.partition(":")
                if kind == "e":
                    source.write_text(Path(text).read_text())
                    os.write(master, b"e\n")
                elif kind == "h":
                    os.write(master, b"h\n")
                    hint = text
                else:
                    os.write(master, {"c": b"\n", "a": b"a\n", "s": b"s\n"}[kind])
        os.close(master)
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
