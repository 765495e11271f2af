"""The small programs deepgym runs inside a sandbox of an image (by the image's ``python3`` or ``/bin/sh``), and
how their replies read: the docker sandbox's init, the file helper every image-based provider moves files
with (:mod:`deepgym.sandbox.remote` too), and the kill of every process of one uid."""

from __future__ import annotations

from ..base import ExecResult, File

# The sandbox's PID 1. SIGCHLD stays blocked and is taken synchronously, so no orphan's exit is missed between
# two waits; as PID 1 it receives no signal it has no handler for, so kill(-1) from inside never reaches it.
INIT = ("import os, signal, sys, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"
        "end = time.monotonic() + float(sys.argv[1])\n"
        "while True:\n"
        "    try:\n"
        "        while os.waitpid(-1, os.WNOHANG)[0]:\n"
        "            pass\n"
        "    except ChildProcessError:\n"
        "        pass\n"
        "    left = end - time.monotonic()\n"
        "    if left <= 0:\n"
        "        break\n"
        "    signal.sigtimedwait({signal.SIGCHLD}, left)\n")
FILE_TIMEOUT_S = 60.0
# put PATH MODE UID GID (the data on stdin) and get PATH (prints "mode uid gid", a newline, the data), each
# as the file's owner. Exit 2: no such file; 3: not a regular file.
FILE_HELPER = ("python3", "-I", "-S", "-c",
               "import os, stat, sys\n"
               "def become(uid, gid):\n"
               "    os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
               "try:\n"
               "    if sys.argv[1] == 'put':\n"
               "        path, mode, uid, gid = sys.argv[2], *map(int, sys.argv[3:6])\n"
               "        data = sys.stdin.buffer.read()\n"
               "        become(uid, gid)\n"
               "        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode & 0o777)\n"
               "        os.write(fd, data) if data else None\n"
               "        os.fchmod(fd, mode)\n"
               "        os.close(fd)\n"
               "    else:\n"
               "        info = os.stat(sys.argv[2])\n"
               "        if not stat.S_ISREG(info.st_mode):\n"
               "            sys.exit(3)\n"
               "        become(info.st_uid, info.st_gid)\n"
               "        with open(sys.argv[2], 'rb') as f:\n"
               "            data = f.read()\n"
               "        sys.stdout.buffer.write(b'%d %d %d\\n' % (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) + data)\n"
               "except FileNotFoundError:\n"
               "    sys.exit(2)\n")
# kill(-1) from a shell of the target uid: every process of that uid but the shell itself, atomically.
KILL_ALL = ("/bin/sh", "-c", "kill -s KILL -- -1")


def read_file_reply(path: str, result: ExecResult) -> File:
    """The file that FILE_HELPER's ``get`` of ``path`` printed, or the OSError its exit status means."""
    if result.exit_code != 0:
        raise file_error(path, result)
    header, _, data = result.stdout.partition(b"\n")
    mode, uid, gid = (int(field) for field in header.split())
    return File(data=data, mode=mode, uid=uid, gid=gid)


def file_error(path: str, result: ExecResult) -> OSError:
    """What FILE_HELPER's exit status (2: no such file, 3: not a regular file) means for ``path``."""
    if result.exit_code == 2:
        return FileNotFoundError(path)
    if result.exit_code == 3:
        return FileNotFoundError(f"{path} is not a regular file")
    return PermissionError(f"cannot access {path} in the sandbox: {result.stderr_tail.strip()[-500:]}")
