"""Integrations with training frameworks. Each submodule imports its framework on its own, so importing
``deepgym`` or this package never pulls in verl, torch or docker."""
