"""deepgym's session environments as TRL environments: ``GRPOTrainer(environment_factory=...)`` runs one
multi-turn episode per rollout in its own container, and the episode's final verification is the reward.

TRL 1.16 (``trl/trainer/grpo_trainer.py``) makes one instance per concurrent rollout with the factory and reuses
it: before each rollout it calls ``reset(**row)`` and appends the string it returns to the prompt's last message;
every public method of the instance's *class* is a tool (its name, type hints and Google-style docstring become
the schema the model sees), the model's tool calls run them, and after the rollout ``get_reward()`` is called
once per rollout as a reward column named after the class (a ``None`` becomes NaN there).

- :class:`DeepGymShellEnv`: one ``bash(command)`` tool, each call a fresh ``bash -c`` (shell environments);
- :class:`DeepGymTerminalEnv`: ``run(command)`` and ``terminal(keystrokes, duration)`` on one persistent
  terminal (``session: {terminal: persistent}``, the default of imported Harbor tasks).

:func:`make_trl_env_factory` picks the class from the session an environment makes (a
:class:`~deepgym.session.TerminalSession` or not), never from its name; :func:`make_trl_env_factories` gives
TRL's dict form, one factory per environment, routed by the rows' ``environment`` column (:func:`trl_rows`).

The reward is the episode's verdict, scored once, or ``None`` when there is no verdict (the sandbox could not
start, the engine failed): :class:`~deepgym.integrations.trl.DeepGymGRPOTrainer` keeps such a rollout out of the
loss, as it does for a reward function's ``None``. The container is removed once the episode is scored, when the
instance is reset for the next rollout, when it is garbage collected, and when the trainer's ``train`` ends.
A class here has no public method but its tools, ``reset`` and ``get_reward``, since TRL would offer any other
to the model; closing is :meth:`DeepGymSessionEnv._close`.

Nothing here imports TRL or torch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..outcome import NoVerdictError, Outcome
from ..session import DesktopSession, TerminalSession
from ..rows import RowTask
from .trl import DEEPGYM_REWARD_ATTR, Scorer
from .verl import get_client

if TYPE_CHECKING:
    from ..client import DeepGym
    from ..environments import Environment
    from ..session import Session

__all__ = ["DeepGymSessionEnv", "DeepGymShellEnv", "DeepGymTerminalEnv", "env_class", "make_trl_env_factories",
           "make_trl_env_factory"]

STOPPED = "[the environment stopped; this episode is over and is not scored]"
OVER = "[the episode is over; no more actions run]"


def _close_held(held: list[Session | None]) -> None:
    """Remove the held session's container; the finalizer's target, so it must not refer to the instance."""
    session, held[0] = held[0], None
    if session is not None:
        session.close()


def _unseen(text: str, prompt: Any) -> str:
    """The first observation less what the row's prompt already shows: TRL appends what ``reset`` returns to the
    prompt's last message, and :func:`~deepgym.integrations.trl.trl_rows` writes the environment's prompt there,
    which the first observation begins with."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        prompt = prompt[-1].get("content")
    shown = prompt.strip() if isinstance(prompt, str) else ""
    if not shown:
        return text
    rest = text[len(shown):].lstrip("\n") if text.startswith(shown) else text
    return ("" if prompt.endswith("\n\n") else "\n" if prompt.endswith("\n") else "\n\n") + rest


class DeepGymSessionEnv:
    """One deepgym episode per TRL rollout; its tools come from the subclass (:class:`DeepGymShellEnv`,
    :class:`DeepGymTerminalEnv`).

    ``env`` fixes the environment; when it is None each row names it, by the rules of
    :func:`~deepgym.integrations.trl.make_trl_reward_fn`: the ``env_column`` column (``environment``, as
    :func:`~deepgym.integrations.trl.trl_rows` writes; TRL passes it to ``reset`` when the factory is a single
    callable), else verl's ``extra_info.environment`` or ``data_source``. The variant is ``variant``, else the
    row's. ``mode``, ``dg`` and ``allow_local`` pick the client as there.
    """

    persistent: bool = False
    """Whether the tools drive a persistent terminal; an episode of the other kind is refused at ``reset``."""

    def __init__(self, env: str | Environment | None = None, *, mode: str = "auto", dg: DeepGym | None = None,
                 variant: int | None = None, env_column: str = "environment", allow_local: bool | None = None):
        self._scorer = Scorer(env, mode, dg, variant, env_column, None, allow_local)
        self._held: list[Session | None] = [None]
        self._outcome: Outcome | None = None
        self._finalizer = weakref.finalize(self, _close_held, self._held)

    def reset(self, **row: Any) -> str:
        """Start the row's episode in a fresh container (closing the previous one); the task as the model sees
        it, after the prompt. A sandbox that cannot start is no verdict: the tools then say the episode stopped,
        and the reward is None."""
        self._close()
        self._outcome = None
        envs, variants = self._scorer.targets(1, {key: [value] for key, value in row.items()})
        target = envs[0]
        if isinstance(target, RowTask):
            raise ConfigurationError(f"{type(self).__name__}: the row carries its own tests ({row.get('data_source')!r}"
                                     ") and has no episode to run. Fix: judge such rows with make_trl_reward_fn")
        client = self._scorer.dg or get_client(self._scorer.mode, allow_local=self._scorer.allow_local)
        session = client.session(target, variants[0])
        self._held[0] = session
        try:
            self._check(session)
            first = session.start()
        except NoVerdictError as exc:
            self._outcome = exc
            self._close()
            return STOPPED
        except BaseException:
            self._close()
            raise
        return _unseen(first.text, row.get("prompt"))

    def get_reward(self) -> float | None:
        """TRL's reward hook (called once per rollout): :attr:`reward`."""
        return self.reward

    @property
    def reward(self) -> float | None:
        """The episode's score in [0, 1], verified once on first read (the container is then removed), or None
        when there is no verdict, or no episode was started."""
        session = self._held[0]
        if self._outcome is None and session is not None:
            try:
                self._outcome = session.score()
            except NoVerdictError as exc:
                self._outcome = exc
            finally:
                self._close()
        if self._outcome is None or not self._outcome.has_verdict:
            return None
        return float(self._outcome.score)

    @property
    def outcome(self) -> Outcome | None:
        """The last episode's verdict or NoVerdictError, once it has one (a failed start, or :attr:`reward`)."""
        return self._outcome

    def _check(self, session: Session) -> None:
        """Refuse an episode these tools cannot act on, naming the class that can."""
        wanted = env_class(session)
        if wanted.persistent != self.persistent:
            raise ConfigurationError(f"{session.env.id}'s episodes run in a "
                                     f"{'persistent terminal' if wanted.persistent else 'fresh shell per action'}, which "
                                     f"{type(self).__name__}'s tools do not drive. Fix: use {wanted.__name__}, or "
                                     f"make_trl_env_factory({session.env.id!r}), which picks the class")

    def _step(self, action: Any) -> str:
        """One action of the episode; what the model sees of it."""
        session = self._held[0]
        if session is None and self._outcome is None:
            return "[no episode is running: reset was not called]"
        if session is None or session.done or session.outcome is not None:
            return OVER if self._outcome is None or self._outcome.has_verdict else STOPPED
        step = session.step(action)
        text = step.observation.text
        return f"{text}\n{OVER}" if step.done else text

    def _close(self) -> None:
        """Remove the episode's container, if one is alive; idempotent."""
        _close_held(self._held)


setattr(DeepGymSessionEnv, DEEPGYM_REWARD_ATTR, True)  # the trainer keeps this class's None out of the loss


class DeepGymShellEnv(DeepGymSessionEnv):
    """A shell environment's episode with one ``bash`` tool: each call is a fresh ``bash -c`` in the task's
    working directory."""

    def bash(self, command: str) -> str:
        """
        Run a shell command in the task's sandbox, in its working directory. Each call is a fresh shell: a `cd` or
        a variable lasts one command.

        Args:
            command: The shell command to run.

        Returns:
            What the command printed (stdout and stderr together), and its exit status when it is not 0.
        """
        return self._step(command)


class DeepGymTerminalEnv(DeepGymSessionEnv):
    """A persistent terminal's episode: ``run`` types a command and waits for the prompt, ``terminal`` sends raw
    keys (Harbor's Terminus shape). The working directory, variables, background jobs and interactive programs
    carry over from one call to the next."""

    persistent = True

    def run(self, command: str) -> str:
        """
        Type a command into the terminal and press Enter, then wait until the shell is back at its prompt (or the
        step's time limit passes; the command then keeps running). The working directory, variables and
        background jobs carry over between calls.

        Args:
            command: The command line to type; several lines are typed as one input.

        Returns:
            The terminal's new output: the echoed command, what it printed and the next prompt.
        """
        return self._step(command)

    def terminal(self, keystrokes: str, duration: float = 1.0) -> str:
        """
        Send raw keystrokes to the terminal, then wait. Use it for interactive programs (a REPL, a pager, an
        editor). A key name alone is that key: C-c, C-d, Enter, Escape, Tab, Up, Down; any other text is typed as
        it is, with a newline pressing Enter.

        Args:
            keystrokes: The keys to send.
            duration: Seconds to wait after sending them before reading the screen.

        Returns:
            The terminal's new output, or its screen while a full-screen program holds it.
        """
        return self._step({"keystrokes": keystrokes, "duration": duration})


def env_class(session: Session | DesktopSession) -> type[DeepGymSessionEnv]:
    """The class whose tools drive ``session``: :class:`DeepGymTerminalEnv` for a persistent terminal,
    :class:`DeepGymShellEnv` for a fresh shell per action; a desktop is refused (ConfigurationError)."""
    if isinstance(session, DesktopSession):
        raise ConfigurationError(f"{session.env.id} is a desktop environment: its actions are computer-use actions, "
                                 "which no TRL environment here offers. Fix: train it with verl's deepgym_agent loop "
                                 "(docs/verl.md)")
    return DeepGymTerminalEnv if isinstance(session, TerminalSession) else DeepGymShellEnv


def make_trl_env_factory(env: str | Environment | None = None, *, terminal: bool | None = None, mode: str = "auto",
                         dg: DeepGym | None = None, variant: int | None = None, env_column: str = "environment",
                         allow_local: bool | None = None) -> Callable[[], DeepGymSessionEnv]:
    """``environment_factory`` for ``GRPOTrainer``: each call makes a :class:`DeepGymShellEnv` or
    :class:`DeepGymTerminalEnv` (see :class:`DeepGymSessionEnv` for the arguments).

    With ``env`` the class is the one its sessions need. Without it each row names its environment, and TRL reads
    the tools from the class before it sees a row, so ``terminal`` says which: True for persistent-terminal
    environments (imported Harbor tasks), False for fresh-shell ones; a row of the other kind is refused at
    ``reset``. A dataset that mixes both kinds takes :func:`make_trl_env_factories`."""
    if env is not None:
        with (dg or get_client(mode, allow_local=allow_local)).session(env) as session:  # nothing is started
            cls = env_class(session)
        if terminal is not None and terminal != cls.persistent:
            raise ConfigurationError(f"terminal={terminal}, but {getattr(env, 'id', env)!r} runs its episodes "
                                     f"{'in a persistent terminal' if cls.persistent else 'in a fresh shell'}. Fix: "
                                     "leave terminal unset; the environment decides")
    elif terminal is None:
        raise ConfigurationError("make_trl_env_factory() without an environment needs terminal=True or False: TRL "
                                 "reads the tools before it sees a row. Fix: pass the environment, terminal=, or "
                                 "use make_trl_env_factories(names) for a dataset that mixes both kinds")
    else:
        cls = DeepGymTerminalEnv if terminal else DeepGymShellEnv

    def factory() -> DeepGymSessionEnv:
        return cls(env, mode=mode, dg=dg, variant=variant, env_column=env_column, allow_local=allow_local)

    return factory


def make_trl_env_factories(names: str | Iterable[str], *, mode: str = "auto", dg: DeepGym | None = None,
                           variant: int | None = None, allow_local: bool | None = None
                           ) -> dict[str, Callable[[], DeepGymSessionEnv]]:
    """TRL's dict form of ``environment_factory``: one factory per environment, each making the class its sessions
    need. TRL picks the factory by each row's ``environment`` column (:func:`~deepgym.integrations.trl.trl_rows`
    writes it) and shows each row only its environment's tools, so one dataset can mix shell and terminal
    environments."""
    names = [names] if isinstance(names, str) else list(names)
    return {name: make_trl_env_factory(name, mode=mode, dg=dg, variant=variant, allow_local=allow_local)
            for name in names}
