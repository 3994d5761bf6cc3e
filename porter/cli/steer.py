"""Steering a port from the terminal (``porter port --interactive``).

After each candidate, :class:`TerminalSteering` shows its verdict table and its diff against the
text before it (:func:`porter.report.terminal.render_round`), then asks::

    [Enter] go on | h: hint for the model | e: edit in $EDITOR | a: accept the best | s: stop

A hint goes into the model's next prompt and the run record; an edit is verified as the next
candidate; accept ends the port with its best candidate (judged as always); stop ends it without
a review branch, resumable. Everything is written to stderr and read from stdin, so stdout keeps
only the result. It never prompts when stdin is not a terminal (:func:`port_steering` says so
once and the port runs on its own), and end of input (Ctrl-D) ends the prompting.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from porter.agent.steering import CONTINUE, Action, RoundView, Steer, Steering
from porter.errors import InputError

MENU = "[Enter] go on | h: hint for the model | e: edit in $EDITOR | a: accept the best | s: stop > "


class TerminalSteering:
    """Asks a person at a terminal after each candidate (see the module docstring)."""

    def __init__(self, stdin: TextIO | None = None, stderr: TextIO | None = None,
                 editor: str | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.out = stderr or sys.stderr
        self.editor = editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        self.closed = False

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _ask(self, prompt: str) -> str | None:
        """One line from the person, or None at end of input."""
        print(prompt, end="", file=self.out, flush=True)
        line = self.stdin.readline()
        if not line:
            self.closed = True
            self._say("\nporter: end of input: no more prompts, the port goes on by itself")
            return None
        return line.rstrip("\n")

    def after_candidate(self, view: RoundView) -> Steer:
        from porter.report.terminal import render_round

        if self.closed:
            return CONTINUE
        self._say("")
        self._say(render_round(view))
        while True:
            answer = self._ask(MENU)
            if answer is None:
                return CONTINUE
            choice = answer.strip().lower()
            if choice in ("", "c", "continue"):
                return CONTINUE
            if choice in ("a", "accept"):
                return Steer(Action.ACCEPT)
            if choice in ("s", "stop", "q"):
                return Steer(Action.STOP)
            if choice in ("h", "hint"):
                hint = self._ask("hint> ")
                if hint is None:
                    return CONTINUE
                if hint.strip():
                    return Steer(Action.HINT, hint.strip())
                self._say("no hint given")
                continue
            if choice in ("e", "edit"):
                edited = self._edit(view)
                if edited is not None:
                    return Steer(Action.EDIT, edited)
                continue
            self._say(f"porter: {answer!r}? answer h, e, a, s, or Enter")

    def _edit(self, view: RoundView) -> str | None:
        """The candidate as the person left it in their editor, or None (unchanged, editor failed)."""
        with tempfile.TemporaryDirectory(prefix="porter-edit-") as folder:
            path = Path(folder) / f"candidate-{view.record.index:02d}.ptx"
            path.write_text(view.text)
            try:
                done = subprocess.run([*shlex.split(self.editor), str(path)], check=False)
            except (OSError, ValueError) as err:
                self._say(f"porter: cannot start the editor {self.editor!r} ({err}); set $EDITOR")
                return None
            if done.returncode != 0:
                self._say(f"porter: the editor exited with {done.returncode}; nothing to check")
                return None
            text = path.read_text()
        if text == view.text:
            self._say("porter: no change; nothing to check")
            return None
        return text


def port_steering(interactive: bool, *, as_json: bool = False, stdin: TextIO | None = None) -> Steering | None:
    """The steering ``--interactive`` asks for: a terminal's, or None (said once) when stdin is not one."""
    if not interactive:
        return None
    if as_json:
        raise InputError("--interactive and --json: choose one (the prompts would mix with machine output)")
    stream = stdin or sys.stdin
    if not stream.isatty():
        print("porter: --interactive: stdin is not a terminal, so there are no prompts; the port runs by itself",
              file=sys.stderr, flush=True)
        return None
    return TerminalSteering(stdin=stream)
