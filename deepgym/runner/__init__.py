"""The in-image runner: the trusted half of every verdict.

This package is standard-library only. The base image copies it to ``deepgym_runner`` and runs it as the
container's entry point; the ``local`` runtime runs the same code as a host subprocess. It reads one request
(the submission and the limits), runs the environment's hidden tests against the submission in separate,
unprivileged processes, and writes one report to its own stdout, which the submission never shares.

Modules, from the entry points down (each imports only those below it or beside it in its folder):

- ``__main__``: argv to :mod:`oneshot` (``python3 -m deepgym_runner``) or :mod:`serve` (``... serve``)
- ``oneshot``: one request in, events out: the image checked, the kind judged under a heartbeat, the report
- ``serve``: warm mode's long-lived server, one forked one-shot judge per sample
- ``cleanup``: what warm mode clears after each sample, and the proof that it did
- ``kinds/function``: function tasks: calls to the submission's worker, answers compared
- ``kinds/program``: program tasks: stdin in, stdout compared
- ``kinds/patch``: patch tasks: the diff applied by its own uid, hidden pytest and probes run
- ``kinds/rows``: a dataset row's ground truth as the tests the runner runs (stdin, call and assert formats)
- ``kinds/row_tests``: a row's trusted assert tests, run in a worker of the applier's uid
- ``kinds/hidden_cases``: a function environment's cases, computed once at image build
- ``kinds/case_server``: a program's cases forked from one zygote instead of one interpreter each
- ``episode/verify``: a session's setup and verification: probes, services checked, the verifier run
- ``episode/harness``: the one verifier harness, shell and desktop alike (quiescence, runs as a uid, the report)
- ``episode/services``: a session's service supervisor and its health check
- ``episode/computer``: the desktop action set, checked on both sides
- ``confine/procfs``: the /proc and cgroup readers
- ``confine/usage``: a window's usage, the sample's budget, memory evidence, the no-verdict exceptions
- ``confine/processes``: spawn, measure and kill untrusted processes (``Processes``, ``Meter``)
- ``confine/container``: the image's confinement: processes found, killed and given folders by uid
- ``confine/local``: the host's local mode: found and killed by session, no confinement at all
- ``confine/supervise``: waiting on one untrusted process under its limits, and how that ended
- ``confine/workspace``: a sample's folders, each made and removed with its owner's rights
- ``confine/privileges``: the runner's capabilities, and acting as a uid (kill, mkdir, remove)
- ``confine/worker``: the untrusted side's bootstrap (a function, a script, pytest, the patch applier)
- ``confine/zygote``: forking workers and program cases from a pristine process
- ``confine/forked``: the runner's handles on the zygotes' children
- ``confine/fdpass``: passing descriptors over a unix socket
- ``channels``: every boundary where the submission's data enters the runner, one parse step each
- ``diff``: the diff text's boundary, parsed as strictly as git does
- ``protocol``: the wire format, the limits and the error-type vocabulary
- ``wire``: the JSON codec of the protocol and the worker's replies
- ``literal``: Python values passed as data to and from a worker
"""
