"""The folders of one sample: the submission's, the runner's and (patch tasks) the applier's."""

from __future__ import annotations

import os

from ..protocol import Record
from .privileges import remove_tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .processes import Processes


class Workspace(Record):
    """The folders of one sample, all fresh and all removed afterwards (:meth:`remove`).

    ``scratch`` is the submission's (the request's uid, 0700): its processes' working directory, HOME and
    TMPDIR. ``runner`` is the runner's (root, 0711): what the submission may read but not change, such as a
    program's code, in folders the judge makes readable. ``applier`` is the patch applier's (its uid, 0755;
    patch tasks only): the patched tree, which the submission's tests read but cannot change. Each is created
    and removed with its owner's rights, so the runner needs neither CAP_CHOWN nor CAP_DAC_OVERRIDE."""

    scratch: str
    runner: str
    applier: str | None

    @classmethod
    def create(cls, processes: Processes, scratch: str | None, root: str, applier: bool) -> Workspace | str:
        """The workspace under ``root`` with the submission's folder at ``scratch`` (None: a fresh name) and,
        with ``applier`` (patch tasks), the applier's; or why it cannot be made (the host's bug: an existing
        scratch folder, a root the uid cannot write). Each folder costs a fork, so only patch tasks get two."""
        token = os.urandom(8).hex()
        scratch = scratch or os.path.join(root, f"deepgym-{token}")
        applier_dir = os.path.join(root, f"deepgym-applier-{token}") if applier else None
        folders = [(processes.uid, scratch, 0o700)] + ([(processes.applier_uid, applier_dir, 0o755)] if applier_dir
                                                       else [])
        for uid, path, mode in folders:
            problem = processes.confinement.make_dir(uid, path, mode)
            if problem is not None:
                if path == applier_dir:
                    processes.confinement.remove_dir(processes.uid, scratch)
                return problem
        runner = os.path.join(root, f"deepgym-runner-{token}")
        os.mkdir(runner, 0o711)
        os.chmod(runner, 0o711)  # past the umask
        processes.homes = {processes.uid: scratch, **({processes.applier_uid: applier_dir} if applier_dir else {})}
        return cls(scratch, runner, applier_dir)

    def remove(self, processes: Processes) -> None:
        """Remove every folder, each with its owner's rights. Call after :meth:`Processes.kill_all`."""
        remove_tree(self.runner)
        for uid, path in ((processes.uid, self.scratch), (processes.applier_uid, self.applier)):
            if path is None:
                continue
            processes.confinement.remove_dir(uid, path)
