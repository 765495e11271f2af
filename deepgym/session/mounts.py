"""An episode's own folders (:func:`deepgym.session.shell.episode_mounts`) on a provider that makes no mounts
but whose sandboxes have a root file system that root may write (the remote providers, ``Provider.writable_root``).

Docker's provider makes each folder a tmpfs of its owner on a read-only root: empty at the start, unwritable by
anyone else, and impossible to rename away, while the agent can write nowhere but ``/tmp``, ``/dev/shm`` and
those folders. :func:`make_folders` gives an episode the same on a writable root, as root, through the sandbox's
exec, before any command of the agent's runs (:data:`FOLDERS`):

1. **Nothing else is writable.** Every folder and file outside ``/proc``, ``/sys``, ``/dev`` and ``/tmp`` that
   every user may write loses that bit, as the read-only root denies it under docker (the tampering check
   reads only the folders the agent could write). A file or folder the image gave the agent's or the verifier's
   uid refuses the episode: under docker that uid could not write it either, but here it could.
2. **Each folder is made fresh.** What the image has at its path (a task's ``WORKDIR`` with its files: the
   workspace is filled from the image's copy of them) is removed, as a mount would hide it (an overlay root
   cannot rename a folder of a lower layer); the folder is made empty, owned by its uid (user and group), with
   its mode.
3. **It is proved.** Each folder is a real folder (no link, none on its path), of its owner, of its mode and
   empty; and no folder above it may be written by the agent's or the verifier's uid, so none can swap it.

What a tmpfs gives that a folder cannot: the size bound (the provider's disk bounds them) and ``noexec``
(docker mounts ``/logs`` noexec; only the verifier's uid may write it either way).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence

from ..sandbox import ExecOptions, Mount, Provider, Sandbox
from .episode import HOST_GRACE_S

# Walking the image's files for step 1 takes well under a second for a usual image; a huge one gets this long.
FOLDERS_TIMEOUT_S = 120.0
FOLDERS_MARK = "DEEPGYM-FOLDERS"
# Run as root by the image's python3, the request on stdin: {"mounts": [{path, uid, mode}], "uids", "mark"}.
FOLDERS = r'''
import json, os, shutil, stat, sys
request = json.loads(sys.stdin.read())
uids = set(request["uids"])
EXEMPT = ("/proc", "/sys", "/dev", "/tmp")
problems, closed = [], 0

def file_or_folder(info):
    return stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)

def walk(top):
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.path in EXEMPT:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, info
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)

for path, info in walk("/"):
    if not file_or_folder(info):
        continue
    if info.st_uid in uids or info.st_gid in uids:
        problems.append("the image gives %s to uid %d, gid %d, which deepgym runs the agent or the verifier as"
                        % (path, info.st_uid, info.st_gid))
    elif info.st_mode & stat.S_IWOTH:
        try:
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~stat.S_IWOTH)
            closed += 1
        except OSError as exc:
            problems.append("%s is writable by every user and stays so: %s" % (path, exc))
if not problems:
    os.umask(0o022)
    for mount in request["mounts"]:
        path = mount["path"]
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            os.mkdir(path, 0o700)
            os.chown(path, mount["uid"], mount["uid"])
            os.chmod(path, mount["mode"])
        except OSError as exc:
            problems.append("%s could not be made: %s" % (path, exc))
for mount in request["mounts"] if not problems else []:
    path = mount["path"]
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or os.path.realpath(path) != path:
        problems.append("%s is not a folder reached without links" % path)
    elif (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) != (mount["uid"], mount["uid"], mount["mode"]):
        problems.append("%s is %d:%d mode %o, not %d:%d mode %o" % (path, info.st_uid, info.st_gid,
                        stat.S_IMODE(info.st_mode), mount["uid"], mount["uid"], mount["mode"]))
    elif os.listdir(path):
        problems.append("%s is not empty" % path)
    above = os.path.dirname(path)
    while True:
        up = os.lstat(above)
        if up.st_uid in uids or (up.st_gid in uids and up.st_mode & stat.S_IWGRP) or up.st_mode & stat.S_IWOTH:
            problems.append("%s, above %s, may be written by the agent or the verifier" % (above, path))
        if above == "/":
            break
        above = os.path.dirname(above)
print(request["mark"], json.dumps({"problems": problems, "closed": closed}), flush=True)
'''


def makes_folders(provider: Provider) -> bool:
    """Whether an episode that needs folders of its own can have them on ``provider``: it mounts them, or the
    episode makes them on its writable root (:func:`make_folders`)."""
    return provider.mounts or provider.writable_root


def make_folders(sandbox: Sandbox, mounts: Sequence[Mount], uids: Sequence[int]) -> str | None:
    """Make ``mounts`` as folders in ``sandbox`` (fresh from the provider, nothing of the agent's has run) and prove
    them, as the module's docstring says; ``uids`` are the agent's and the verifier's. Why the episode cannot
    start, or None. Raises SandboxError."""
    mark = f"{FOLDERS_MARK}-{secrets.token_hex(8)}"
    request = {"mounts": [{"path": mount.path, "uid": mount.uid, "mode": mount.mode} for mount in mounts],
               "uids": list(uids), "mark": mark}
    result = sandbox.exec(["python3", "-I", "-S", "-c", FOLDERS],
                          ExecOptions(stdin=json.dumps(request).encode(), user="0:0",
                                      timeout_s=FOLDERS_TIMEOUT_S + HOST_GRACE_S))
    for line in reversed(result.stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith(mark + " "):
            problems = json.loads(line[len(mark) + 1:])["problems"]
            return "; ".join(problems[:5]) or None
    said = "it ran past its time" if result.timed_out else f"exit status {result.exit_code}"
    return f"the episode's folders could not be made ({said}): {result.stderr_tail.strip()[-300:]}"
