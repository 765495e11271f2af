"""deepgym: rewards you can trust for reinforcement learning on code.

    from deepgym import DeepGym, load_environment, NoVerdictError

    gym = DeepGym(mode="docker")
    verdict = gym.run("coin_change", model_response)   # Verdict, or raises NoVerdictError

Importing deepgym is cheap: docker-py and the sandbox providers load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["BatchResult", "DeepGym", "DeepGymError", "Environment", "NoVerdictError", "Verdict",
           "list_environments", "load_environment"]

_LAZY = {
    "BatchResult": "deepgym.outcome",
    "DeepGym": "deepgym.client",
    "DeepGymError": "deepgym.errors",
    "Environment": "deepgym.environments",
    "NoVerdictError": "deepgym.outcome",
    "Verdict": "deepgym.outcome",
    "list_environments": "deepgym.environments",
    "load_environment": "deepgym.environments",
}

if TYPE_CHECKING:
    from .client import DeepGym
    from .environments import Environment, list_environments, load_environment
    from .errors import DeepGymError
    from .outcome import BatchResult, NoVerdictError, Verdict


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'deepgym' has no attribute {name!r}")
