"""Harbor task directories as deepgym session environments (``deepgym harbor import``, docs/harbor.md).

Harbor's task format (``task.toml``, ``instruction.md``, ``environment/Dockerfile``, ``tests/test.sh``,
``solution/solve.sh``) is what Terminal-Bench 2.0 and Harbor's registry adapters ship. This package reads it
without depending on the ``harbor`` package (its schema is pinned here, from the 0.25.0 wheel) and writes a
folder that deepgym's manifest loader, content hash and bake build treat like any other environment.

- :mod:`.schema`: every ``task.toml`` field and what deepgym does with it (supported, ignored with a warning,
  refused with the fix), and the parser that applies that table.
- :mod:`.dockerfile`: the task's Dockerfile, its base images (mapped by ``--base-map``) and deepgym's trusted
  runner appended in a layer of its own.
- :mod:`.importer`: one task directory to one environment folder.
- :mod:`.bases`: ``--base-map`` parsing, and the check before a build that every base image can be had.
- :mod:`.bake`: the imported environment's bake target (the task's own context, deepgym's as named contexts).
- :mod:`.cli`: the ``deepgym harbor`` subcommands; it imports the rest only when a command runs.

Nothing here is imported by ``import deepgym``: the CLI adds the subcommand and loads the importer lazily.
"""
