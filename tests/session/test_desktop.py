"""Desktop episodes on real containers of the desktop image: deepgym check of every desktop environment, the
agent's attempts to leave the app, and the recorder's own door. Each builds the desktop images once."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import before_reference
from deepgym import DeepGym
from deepgym.authoring.check import check, table
from deepgym.environments import load_environment
from deepgym.images import build
from deepgym.authoring.replay import action_sequences

pytestmark = [pytest.mark.docker, pytest.mark.desktop]
DESKTOPS = ["signup_form", "todo_list"]
OTHERS = ["settings_tabs", "expense_sheet"]


@pytest.fixture(scope="module", autouse=True)
def images():
    build(DESKTOPS + OTHERS)


@pytest.fixture(scope="module")
def gym():
    with DeepGym(mode="docker", max_parallel=3) as client:
        yield client


def key(combo: str) -> dict:
    return {"action_type": "key", "content": combo}


def typed(text: str) -> dict:
    return {"action_type": "type", "content": text}


def test_every_desktop_environment_passes_check(gym):
    rows = check(DESKTOPS, gym, reruns=1)
    assert all(row.ok for row in rows), table(rows)
    for row in rows:
        assert len(row.reference) == 8 and len(row.wrong) == 16
        assert all(0 <= outcome.score < 1 for outcome in row.wrong.values())


@pytest.mark.parametrize("name", OTHERS)
def test_the_other_apps_score_their_references_1_and_their_wrong_sequences_below(gym, name):
    """The full check of these (3 reruns of every variant's reference) is `deepgym check`; here every variant's
    reference once and the known-wrong sequences of one variant, to keep CI short."""
    env = load_environment(name)
    references = action_sequences(env, "reference")
    with ThreadPoolExecutor(3) as pool:
        scores = list(pool.map(lambda variant: _replay(gym, name, variant, references[variant]).score, range(8)))
        wrong = [sequences for stem, sequences in ((s, action_sequences(env, s)) for s in env.solutions())
                 if stem.startswith("wrong_")]
        wrong_scores = list(pool.map(lambda sequences: _replay(gym, name, 5, sequences[5]).score, wrong))
    assert scores == [1.0] * 8 and len(wrong_scores) == 2 and all(score < 1 for score in wrong_scores)


def test_an_episode_sees_png_screens_and_settle_times(gym):
    with gym.session("todo_list", 2) as session:
        first = session.start()
        assert first.images[0][:8] == b"\x89PNG\r\n\x1a\n" and "Pick up dry cleaning" in first.text
        step = session.step({"action_type": "click", "x": 1023, "y": 767, "button": 1})
        assert step.observation.text.startswith("invalid action: unknown field") and not step.done
        step = session.step({"action_type": "key", "content": "hyper+x"})
        assert "unknown key" in step.observation.text and not step.observation.images
        step = session.step({"action_type": "scroll", "amount": 3})
        assert "scrolled down 3" in step.observation.text and "settled after" in step.observation.text
        assert step.observation.images and not step.done
        step = session.step({"action_type": "done"})
        assert step.done
        verdict = session.score()
    assert verdict.score == 0.0 and {case.id for case in verdict.cases} >= {"progress:ticked", "guard:nothing_refused"}


# Everything an agent might try in order to leave the app or reach the recorder by another way. Each is
# followed by the reference episode: it still scores 1.0 only if none of them changed the page, opened
# anything over it, or put an event in the log (a forged submission would break "submitted once").
ESCAPES = [
    key("ctrl+shift+i"), key("F12"), key("ctrl+shift+j"), key("ctrl+u"), key("ctrl+n"), key("ctrl+t"),
    key("ctrl+shift+n"), key("ctrl+o"), key("ctrl+s"), key("ctrl+p"), key("ctrl+h"), key("ctrl+j"),
    key("ctrl+l"), typed("javascript:deepgym.send({type:'submit',form:{}})\n"),
    key("ctrl+l"), typed("file:///etc/passwd\n"), key("alt+d"), typed("chrome://settings\n"),
    key("F6"), typed("view-source:http://127.0.0.1:8000/\n"),
    {"action_type": "right_click", "x": 600, "y": 700}, key("Escape"),
    {"action_type": "click", "x": 512, "y": 148}, typed("bash -c 'curl http://127.0.0.1:8000/event'; rm -rf /"),
    key("ctrl+a"), key("BackSpace"),
]


REFUSED = "is not allowed: it is a browser shortcut"


def test_escapes_have_no_effect(gym):
    with before_reference(gym, "signup_form", 0, len(ESCAPES)) as (session, first, finish):
        for action in ESCAPES:
            step = session.step(action)
            assert not step.done, (action, step.observation.text)
            text = step.observation.text
            assert REFUSED in text or "unknown key" in text or "settled" in text, (action, text)
            if action["action_type"] == "key" and "ctrl+" in action["content"] and action["content"] != "ctrl+a":
                assert REFUSED in text, action
        escaped = step.observation.images[0]
        verdict = finish()
    assert verdict.score == 1.0, verdict.details
    assert len(escaped) < 2 * len(first.images[0])  # the same plain page, nothing opened over it


@pytest.mark.parametrize("combo", ["ctrl+w", "ctrl+q", "alt+F4", "ctrl+shift+w"])
def test_the_browsers_close_keys_are_refused(gym, combo):
    with gym.session("signup_form", 1) as session:
        session.start()
        step = session.step(key(combo))
        assert (REFUSED in step.observation.text or "unknown key" in step.observation.text) and not step.done
        assert "settled" in session.step({"action_type": "screenshot"}).observation.text


def test_a_browser_that_dies_ends_the_episode_scored(gym):
    """The browser gone mid-episode (a crash, or a way to close it the action layer missed): the next action
    says so, the episode ends, and it is scored from the recorder's log (here: half the items done)."""
    reference = action_sequences(load_environment("todo_list"), "reference")[0]
    with gym.session("todo_list", 0) as session:
        session.start()
        for action in reference[:3]:
            session.step(action)
        container = session._sandbox.box.container
        subprocess.run(["docker", "exec", "-u", "10011:10011", container, "sh", "-c", "kill -9 -1"],
                       capture_output=True, timeout=60)
        _wait_until_dead(container, "10011")
        step = session.step({"action_type": "screenshot"})
        assert step.done and "browser has closed" in step.observation.text
        verdict = session.score()
    assert verdict.has_verdict and 0 < verdict.score < 1, verdict.details


def _wait_until_dead(container: str, uid: str) -> None:
    """Until every process of ``uid`` in ``container`` has died (a zombie at most): a SIGKILL lands when the
    kernel next runs its target, which on a loaded host can be after the next action has been taken."""
    deadline = time.monotonic() + 120
    while True:
        states = subprocess.run(["docker", "exec", container, "ps", "-u", uid, "-o", "stat="], capture_output=True,
                                text=True, timeout=60).stdout.split()
        if all(state.startswith("Z") for state in states):
            return
        assert time.monotonic() < deadline, f"uid {uid}'s processes outlived SIGKILL for 2 minutes: {states}"
        time.sleep(0.1)


def test_the_recorder_refuses_every_process_but_the_browser(gym):
    """A process of another user (here the action daemon's uid, as if it were compromised) posting an event
    is refused and counted, and the count alone scores the episode 0."""
    with gym.session("signup_form", 0) as session:
        session.start()
        forged = ("import json, urllib.request, urllib.error\n"
                  "request = urllib.request.Request('http://127.0.0.1:8000/event', data=json.dumps({'type': "
                  "'submit', 'form': {}}).encode(), headers={'Content-Type': 'application/json'})\n"
                  "try:\n    urllib.request.urlopen(request)\nexcept urllib.error.HTTPError as e:\n    print(e.code)\n")
        container = session._sandbox.box.container
        said = subprocess.run(["docker", "exec", "-u", "10000:10000", container, "python3", "-c", forged],
                              capture_output=True, text=True, timeout=60)
        assert said.stdout.strip() == "403", said
        for action in action_sequences(load_environment("signup_form"), "reference")[0][:-1]:
            session.step(action)
        verdict = session.score()
    cases = {case.id: case for case in verdict.cases}
    assert cases["guard:submitted_once"].passed and not cases["guard:nothing_refused"].passed
    assert cases["guard:nothing_refused"].actual == {"foreign": 1} and verdict.score == 0.0


def test_the_log_is_out_of_reach_of_the_browser_and_the_actions(gym):
    with gym.session("todo_list", 0) as session:
        session.start()
        container = session._sandbox.box.container
        for uid in ("10000", "10011"):
            tried = subprocess.run(["docker", "exec", "-u", f"{uid}:{uid}", container, "sh", "-c",
                                    "ls /tmp/deepgym-recorder || echo refused; echo x >> /tmp/deepgym-recorder/events.jsonl"
                                    " || echo refused"], capture_output=True, text=True, timeout=60)
            assert tried.stdout.split() == ["refused", "refused"], tried
        ps = subprocess.run(["docker", "exec", container, "ps", "-eo", "uid,comm"], capture_output=True, text=True)
        owners = {line.split()[1]: line.split()[0] for line in ps.stdout.splitlines()[1:] if line.split()}
        assert owners.get("Xvfb") == "10010" and owners.get("chromium") == "10011"


def test_forged_state_typed_into_the_app_is_only_text(gym):
    """The agent types a whole event into a field: the app sends it as the field's text, in its own submission."""
    reference = action_sequences(load_environment("signup_form"), "reference")[0]
    forged = '{"type": "submit", "form": {"name": "Ada Lovelace", "terms": true}}'
    actions = [typed(forged) if action.get("content") == "Ada Lovelace" else action for action in reference]
    verdict = _replay(gym, "signup_form", 0, actions)
    cases = {case.id: case for case in verdict.cases}
    assert cases["guard:submitted_once"].passed and cases["field:name"].actual == forged
    assert 0 < verdict.score < 1


def test_a_flood_of_events_is_capped_and_scores_0(gym):
    """Events beyond the recorder's cap (here posted by the browser's own user, as a runaway or subverted
    page would) are refused and counted; the count fails the guard."""
    flood = ("import json, time, urllib.request\n"
             "from concurrent.futures import ThreadPoolExecutor\n"
             "def post(n):\n"
             "    for attempt in range(50):\n"
             "        try:\n"
             "            return urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/event', "
             "data=json.dumps({'type': 'noise', 'n': n}).encode(), headers={'Content-Type': 'application/json'}))"
             ".close()\n"
             "        except OSError:\n"  # a busy host may reset a connection: try that event again
             "            time.sleep(0.2)\n"
             "    raise SystemExit(f'event {n} never got through')\n"
             "with ThreadPoolExecutor(2) as pool:\n"
             "    list(pool.map(post, range(2050)))\n")
    with gym.session("todo_list", 1) as session:
        session.start()
        done = subprocess.run(["docker", "exec", "-u", "10011:10011", session._sandbox.box.container, "python3", "-c",
                               flood], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-500:]
        for action in action_sequences(load_environment("todo_list"), "reference")[1][:-1]:
            session.step(action)
        verdict = session.score()
    cases = {case.id: case for case in verdict.cases}
    assert verdict.score == 0.0 and cases["guard:nothing_refused"].actual["too_many"] > 0


def _replay(gym, name, variant, actions):
    with gym.session(name, variant) as session:
        session.start()
        for action in actions:
            if session.step(action).done:
                break
        return session.score()


def test_a_prewarmed_desktop_that_died_waiting_is_never_handed_out(gym):
    """The pool's container killed while it waits: the next episode gets a fresh one and scores normally."""
    with gym.session("todo_list", 4) as session:  # makes the pool start a ready one behind it
        session.start()
    ready = gym._ready_desktops()
    assert ready.admission is gym.admission, "a ready desktop is started outside the client's admission"

    def todo_lists() -> list:  # the shared client's pool also holds the other apps' ready desktops
        return [desktop for kind, waiting in ready.waiting().items() if "'todo_list'" in repr(kind) for desktop in waiting]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not todo_lists():
        time.sleep(0.1)
    waiting = todo_lists()
    assert waiting, "the pool made no container"
    subprocess.run(["docker", "kill", waiting[0].box.container], capture_output=True, timeout=60)
    reference = action_sequences(load_environment("todo_list"), "reference")[4]
    with gym.session("todo_list", 4) as session:
        session.start()
        assert session.timings["prewarmed"] == 0.0
        for action in reference:
            session.step(action)
        assert session.score().score == 1.0


def test_closing_the_client_removes_its_prewarmed_desktops_even_one_still_starting():
    """DeepGym.close empties the client's desktop pool before its provider closes: the ready desktop, and one a
    filler is still starting, are removed rather than left to the next start's reaper."""
    from deepgym.sandbox.docker import LABEL

    with DeepGym(mode="docker") as client:
        with client.session("signup_form", 0) as session:
            session.start()  # the pool starts a ready one behind it
        ready = client._ready_desktops()
        run = client.provider.run_id
    assert ready.closed and not any(ready.waiting().values())
    assert client._desktops is None, "a closed client's pool is gone"
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}={run}"], capture_output=True,
                          text=True, timeout=60).stdout.split()
    assert left == [], "no container of the closed client is left"
