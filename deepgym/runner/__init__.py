"""The in-image runner: the trusted half of every verdict.

This package is standard-library only. The base image copies it to ``deepgym_runner`` and runs it as the
container's entry point; the ``local`` runtime runs the same code as a host subprocess. It reads one request
(the submission and the limits), runs the environment's hidden tests against the submission in separate,
unprivileged processes, and writes one report to its own stdout, which the submission never shares.

Modules: ``protocol`` (the wire format and the error-type vocabulary), ``sandbox`` (spawning, limiting,
measuring and killing untrusted processes), ``privileges`` (the runner's capabilities, and acting as a uid), ``worker`` (the untrusted side's bootstrap for function tasks),
``function`` (judging function tasks), ``judge`` (scoring and the report).
"""
