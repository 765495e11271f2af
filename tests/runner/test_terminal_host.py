"""The in-sandbox terminal (deepgym/runner/episode/terminal.py) on this host, without Docker: the real process as
root, its shell switched to an unprivileged uid on a real pseudo-terminal, driven line by line as the host does.
The same behaviour through a container is tests/session/test_terminal.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A uid nothing else on this host uses: the cleanup kills this uid's processes, and no container's (whose
# submissions run as 10000 and up, sharing the host's uids) may be among them.
AGENT_UID = 1_900_417
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the terminal switches its shell to another uid: root only")


def _kill_uid(uid: int) -> None:
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                os.kill(int(name), 9)
        except OSError:
            pass


class Driver:
    def __init__(self, workspace: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", "import runpy, sys\nsys.path.insert(0, sys.argv.pop(1))\n"
             "runpy.run_module('deepgym.runner.episode.terminal', run_name='__main__')", str(ROOT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ready = self.send({"nonce": "0123456789abcdef", "agent_uid": AGENT_UID, "workspace": workspace,
                                "rows": 10, "cols": 60})

    def send(self, message: dict) -> dict:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def type(self, text: str, timeout_s: float = 10) -> dict:
        return self.send({"op": "type", "data": text, "timeout_s": timeout_s})

    def keys(self, data: str, wait_s: float) -> dict:
        return self.send({"op": "keys", "data": data, "wait_s": wait_s})

    def keys_until(self, data: str, wait_s: float, ends: str) -> dict:
        """Keys, then more waits while the output does not end with ``ends`` yet: a key's wait is fixed, and a
        loaded host may answer after it. The reply's output is everything the waits saw."""
        reply = self.keys(data, wait_s)
        output, deadline = reply["output"], time.monotonic() + 15
        while not output.rstrip().endswith(ends) and time.monotonic() < deadline:
            reply = self.keys("", 0.3)
            output += reply["output"]
        return {**reply, "output": output}

    def close(self) -> int:
        self.proc.stdin.close()
        self.proc.stdout.close()
        return self.proc.wait(10)


@pytest.fixture
def term():
    workspace = tempfile.mkdtemp(prefix="deepgym-term-", dir="/tmp")
    os.chown(workspace, AGENT_UID, AGENT_UID)
    driver = Driver(workspace)
    try:
        assert driver.ready["ready"], driver.ready
        yield driver
    finally:
        driver.close()
        _kill_uid(AGENT_UID)  # what the verification's kill does, here by pid
        shutil.rmtree(workspace, ignore_errors=True)


def test_the_directory_the_environment_and_jobs_persist(term):
    assert term.type("mkdir sub && cd sub")["output"].endswith("~/sub$")
    assert "/sub\n" in term.type("export GREETING=hello; pwd")["output"]
    assert "hello-again" in term.type("echo $GREETING-again")["output"]
    started = term.type("sleep 60 &")["output"]
    assert "[1]" in started
    jobs = term.type("jobs; id -u")
    assert "Running" in jobs["output"] and "sleep 60 &" in jobs["output"] and f"\n{AGENT_UID}\n" in jobs["output"]
    assert not jobs["timed_out"] and jobs["exited"] is None


def test_a_command_waits_for_the_prompt_however_long_it_is_silent(term):
    started = time.monotonic()
    reply = term.type("sleep 1.5; echo woke")
    assert time.monotonic() - started >= 1.5 and "woke" in reply["output"] and not reply["timed_out"]


def test_several_lines_wait_for_the_last_prompt(term):
    reply = term.type("cd /\nsleep 0.3\necho last")
    assert reply["output"].rstrip().endswith("last\n/$"), reply["output"]


def test_a_command_is_pasted_so_a_tab_is_kept_and_not_completed(term):
    term.type("cat > Makefile <<EOF\nall:\n\techo made\nEOF")
    assert "^Iecho made$" in term.type("cat -A Makefile")["output"]


def test_without_pastes_several_lines_still_wait_for_the_last_prompt(term):
    term.type("bind 'set enable-bracketed-paste off'")
    reply = term.type("cd /\nsleep 0.3\necho last")
    assert reply["output"].rstrip().endswith("last\n/$"), reply["output"]


def test_a_repl_lives_across_actions(term):
    term.keys_until("python3 -q\r", 1.5, ">>>")
    assert term.type("x = 6 * 7")["output"].endswith(">>>")
    assert "42" in term.type("print(x)")["output"]
    back = term.keys_until("\x04", 0.5, "~$")
    assert back["output"].rstrip().endswith("~$")


def test_a_shell_in_the_shell_has_its_prompt_waited_for(term):
    term.keys_until("bash --norc\r", 1.0, "$")
    started = time.monotonic()
    reply = term.type("sleep 1; echo inner")
    assert time.monotonic() - started >= 1 and "inner" in reply["output"] and not reply["timed_out"]
    assert term.type("exit")["output"].rstrip().endswith("~$")


def test_a_step_that_never_returns_times_out_and_keeps_running(term):
    reply = term.type("echo begun; sleep 30", timeout_s=0.5)
    assert reply["timed_out"] and "begun" in reply["output"]
    interrupted = term.keys_until("\x03", 0.3, "~$")
    assert "^C" in interrupted["output"] and interrupted["output"].rstrip().endswith("~$"), interrupted


def test_git_prints_without_a_pager(term):
    term.type("git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m first")
    reply = term.type("git log --oneline", timeout_s=5)
    assert not reply["timed_out"] and "first" in reply["output"]


def test_a_pager_shows_its_screen_and_gives_the_terminal_back(term):
    term.type("seq 1 100 > numbers")
    shown = term.keys("less numbers\r", 1.0)
    deadline = time.monotonic() + 15
    while not shown["screen"].startswith("1\n2\n3") and time.monotonic() < deadline:
        shown = term.keys("", 0.3)
    assert shown["alternate"] and shown["screen"].startswith("1\n2\n3")
    gone = term.keys_until("q", 0.5, "~$")
    assert not gone["alternate"] and gone["screen"].rstrip().endswith("~$")


def test_a_flood_is_cut_and_the_terminal_answers(term):
    reply = term.type("yes | head -c 20000000; echo end", timeout_s=60)
    assert not reply["timed_out"] and "bytes of output cut" in reply["output"] and "end" in reply["output"]
    assert len(reply["output"]) < 200_000 and term.type("echo still")["output"].count("still") == 2


def test_a_forged_prompt_only_ends_its_own_wait(term):
    reply = term.type("printf '\\033]7770;0123456789abcdef\\007'; sleep 0.5; echo after")
    assert "after" in reply["output"] + term.type("true")["output"]


def test_a_lone_surrogate_is_typed_as_a_question_mark(term):
    assert "a?b" in term.type("echo 'a\ud800b'")["output"]


def test_the_shell_exiting_is_reported(term):
    reply = term.type("exit 3")
    assert reply["exited"] == 3
    assert term.type("echo anyone")["exited"] == 3
