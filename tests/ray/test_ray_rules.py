"""mode="ray" without a cluster: what a node accepts as the caller's image, what each of Ray's failures costs a
sample (before and after it reached a sandbox), the bounded waits, and that a verdict carries its node. Ray's
scheduling itself is faked here; tests/ray/test_ray_cluster.py runs the same code on a real two-node cluster."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

import pytest

# The `ray` extra; without it the mode is daemon_unavailable and there is nothing more to test.
exceptions = pytest.importorskip("ray.exceptions")

from deepgym.environments import load_environment
from deepgym.images import HASH_LABEL, content_hash
from deepgym.judging import Images, observe
from deepgym.runner.protocol import DONE, IN_PLAY, REPORT, STARTED, Request, event_line
from deepgym.sandbox import MODES, ExecOptions, ExecResult, Image, ImageMissing, Provider, SandboxLost, SandboxSpec, \
    StartFailure, make_provider
from deepgym.sandbox.base import ProviderUnavailable
from deepgym.sandbox.ray import errors, node, provider
from deepgym.sandbox.ray.node import Failed, Started
from deepgym.verdict import NoVerdictError, classify

REF = "deepgym-coin_change:ray"
WANTED = {HASH_LABEL: "abc123"}
SPEC = SandboxSpec(image=REF, image_labels=WANTED)
OPTIONS = ExecOptions(timeout_s=5.0)
RESULT = ExecResult(exit_code=0, stdout=b"report", stderr_tail="", timed_out=False, elapsed_s=0.1)


class NodeProvider(Provider):
    """A node's provider with the images it has; ``run`` records the spec it was given."""

    name = "docker"

    def __init__(self, images: Mapping[str, Image], fails: Exception | None = None):
        self.images = dict(images)
        self.fails = fails
        self.ran: list[SandboxSpec] = []

    def image(self, ref: str) -> Image:
        if ref not in self.images:
            raise ImageMissing(f"{ref} is not built")
        return self.images[ref]

    def create(self, spec):
        raise NotImplementedError

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        if self.fails is not None:
            raise self.fails
        self.ran.append(spec)
        return RESULT

    def sweep(self, labels):
        return 0


@pytest.fixture
def on_node(monkeypatch):
    """Make judge_here run as if on node ``n1`` with the given provider (no admission)."""
    def use(local: Provider) -> None:
        monkeypatch.setattr(node, "node_id", lambda: "n1")
        monkeypatch.setattr(node, "local_provider", lambda: (local, None))
    return use


def test_a_node_judges_only_in_the_image_the_caller_resolved():
    good = NodeProvider({REF: Image("sha256:good", dict(WANTED))})
    assert node.checked_image(good, SPEC, "n1").id == "sha256:good"
    with pytest.raises(ImageMissing, match=f"Ray node n1 has no image {REF}"):
        node.checked_image(NodeProvider({}), SPEC, "n1")
    stale = NodeProvider({REF: Image("sha256:old", {HASH_LABEL: "0ld"})})
    with pytest.raises(ImageMissing, match="Ray node n1 has .*sha256:old.*'0ld' there, the caller's files give 'abc123'"):
        node.checked_image(stale, SPEC, "n1")
    unlabelled = NodeProvider({REF: Image("sha256:hand", {})})
    with pytest.raises(ImageMissing, match="None there"):
        node.checked_image(unlabelled, SPEC, "n1")


class PullingProvider(NodeProvider):
    """A node's provider that can pull: ``registry`` holds what a pull fetches."""

    pulls = True

    def __init__(self, images: Mapping[str, Image], registry: Mapping[str, Image]):
        super().__init__(images)
        self.registry = dict(registry)
        self.pulled: list[tuple[str, float]] = []

    def pull(self, ref: str, timeout_s: float) -> Image:
        self.pulled.append((ref, timeout_s))
        if ref not in self.registry:
            raise ImageMissing(f"{ref} could not be pulled: manifest unknown")
        self.images[ref] = self.registry[ref]
        return self.images[ref]


PINNED = "127.0.0.1:5000/deepgym-coin_change@sha256:" + "a" * 64


def test_a_node_pulls_a_digest_it_lacks_and_only_a_digest(monkeypatch):
    monkeypatch.setenv(node.PULL_TIMEOUT_VARIABLE, "7")
    pinned = SandboxSpec(image=PINNED, image_labels=WANTED)
    local = PullingProvider({}, {PINNED: Image("sha256:pulled", dict(WANTED))})
    assert node.checked_image(local, pinned, "n1").id == "sha256:pulled" and local.pulled == [(PINNED, 7.0)]
    assert node.checked_image(local, pinned, "n1").id == "sha256:pulled" and len(local.pulled) == 1  # had now
    with pytest.raises(ImageMissing, match=f"Ray node n1 has no image {REF}"):  # a tag is never pulled
        node.checked_image(PullingProvider({}, {REF: Image("sha256:x", dict(WANTED))}), SPEC, "n1")
    with pytest.raises(ImageMissing, match=f"Ray node n1 lacks {PINNED} and could not pull it: .*manifest unknown"):
        node.checked_image(PullingProvider({}, {}), pinned, "n1")
    stale = PullingProvider({}, {PINNED: Image("sha256:old", {HASH_LABEL: "0ld"})})
    with pytest.raises(ImageMissing, match="'0ld' there, the caller's files give 'abc123'"):
        node.checked_image(stale, pinned, "n1")  # pulled bytes are checked like any other


def test_a_node_says_it_started_then_answers_with_its_id_and_its_image(on_node):
    local = NodeProvider({REF: Image("sha256:good", dict(WANTED))})
    on_node(local)
    answers = list(node.judge_here(SPEC, ["runner"], OPTIONS))
    assert answers[0] == Started("n1", "sha256:good")
    assert answers[1].node == "n1" and answers[1].image_id == "sha256:good" and answers[1].stdout == b"report"
    assert local.ran[0].image == "sha256:good" and local.ran[0].image_labels == {}  # the id, checked here


@pytest.mark.parametrize("images, fails, before_start, error_type", [
    ({}, None, True, "image_missing"),
    ({REF: Image("sha256:good", dict(WANTED))}, SandboxLost("removed"), False, "sandbox_lost"),
    ({REF: Image("sha256:good", dict(WANTED))}, ProviderUnavailable("engine down"), False, "daemon_unavailable"),
])
def test_a_nodes_own_failure_is_an_answer_naming_the_node(on_node, images, fails, before_start, error_type):
    on_node(NodeProvider(images, fails))
    answers = list(node.judge_here(SPEC, ["runner"], OPTIONS))
    failed = answers[0] if before_start else answers[1]
    assert isinstance(failed, Failed) and failed.error_type == error_type and "on Ray node n1" in failed.reason
    assert type(errors.answered(failed)).error_type == error_type


def test_rays_failures_before_a_sandbox_may_be_retried_and_after_it_are_lost():
    crashed = exceptions.WorkerCrashedError()
    assert isinstance(errors.translated(crashed, None), errors.NotReached)
    assert isinstance(errors.translated(exceptions.NodeDiedError("gone"), None), errors.NotReached)
    lost = errors.translated(crashed, Started("n2", "sha256:x"))
    assert isinstance(lost, SandboxLost) and "Ray node n2" in lost.reason
    ours = exceptions.RayTaskError("judge_here", "Traceback ...", ImportError("no module named deepgym"))
    refused = errors.translated(ours, None)
    assert isinstance(refused, StartFailure) and not isinstance(refused, errors.NotReached)
    assert "ImportError" in refused.reason
    with pytest.raises(RuntimeError, match="failed on Ray node n2"):
        errors.translated(ours, Started("n2", "sha256:x"))
    with pytest.raises(KeyError):
        errors.translated(KeyError("ours"), None)


class Stream:
    """A judging task's answers as Ray streams them: ``items`` (values, or exceptions ray.get raises), each
    ready after ``polls`` unanswered waits; ``hang`` keeps the next one from ever coming."""

    def __init__(self, *items: object, polls: int = 0, hang: bool = False):
        self.items = list(items)
        self.polls = polls
        self.hang = hang
        self.cancelled = False

    def __next__(self) -> object:
        if not self.items:
            raise StopIteration
        return self.items.pop(0)


class FakeRay:
    """The part of the ray module the provider uses, answering from one scripted Stream per dispatch; it
    records the options of each dispatch."""

    def __init__(self, *streams: Stream, units: float = 2.0):
        self.streams = iter(streams)
        self.units = units
        self.dispatched: list[dict] = []

    def options(self, **options) -> FakeRay:  # the remote function's, in the provider's ray.remote(judge_here)
        self.dispatched.append(options)
        return self

    def remote(self, *args) -> Stream:
        return next(self.streams)

    def wait(self, streams, timeout):
        stream = streams[0]
        if stream.hang or stream.polls > 0:
            stream.polls -= 1
            return [], streams
        return streams, []

    def get(self, item):
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self, stream, force):
        stream.cancelled = True

    def cluster_resources(self):
        return {"deepgym_sandbox": self.units} if self.units else {}


def dispatching(fake: FakeRay, **options) -> provider.RayProvider:
    """A RayProvider whose Ray, and whose remote judging function, is ``fake``."""
    made = provider.RayProvider(**options)
    made._ray = lambda: fake
    made._judge = fake
    return made


def test_each_sample_asks_for_one_unit_and_comes_back_with_its_node():
    fake = FakeRay(Stream(Started("n1", "sha256:a"), RESULT, polls=2))
    assert dispatching(fake).run(SPEC, ["runner"], OPTIONS) is RESULT
    assert fake.dispatched == [{"num_cpus": 0, "resources": {"deepgym_sandbox": 1}, "max_retries": 0,
                                "scheduling_strategy": "SPREAD"}]


def test_a_sample_lost_before_its_sandbox_is_sent_once_more():
    fake = FakeRay(Stream(exceptions.WorkerCrashedError()), Stream(Started("n2", "sha256:b"), RESULT))
    assert dispatching(fake).run(SPEC, ["runner"], OPTIONS) is RESULT
    assert len(fake.dispatched) == 2


def test_a_sample_lost_twice_before_its_sandbox_is_a_start_failure():
    fake = FakeRay(Stream(exceptions.NodeDiedError("n1 died")), Stream(exceptions.WorkerCrashedError()))
    with pytest.raises(StartFailure, match="before it reached a sandbox"):
        dispatching(fake).run(SPEC, ["runner"], OPTIONS)
    assert len(fake.dispatched) == 2


def test_a_sample_lost_in_play_is_sandbox_lost_and_never_sent_again():
    fake = FakeRay(Stream(Started("n2", "sha256:b"), exceptions.WorkerCrashedError()),
                   Stream(Started("n1", "sha256:a"), RESULT))
    with pytest.raises(SandboxLost, match="Ray node n2 or its worker was lost while the sample was in play"):
        dispatching(fake).run(SPEC, ["runner"], OPTIONS)
    assert len(fake.dispatched) == 1


def test_a_nodes_answer_is_final():
    fake = FakeRay(Stream(Failed("n2", "image_missing", f"on Ray node n2: Ray node n2 has no image {REF}")),
                   Stream(Started("n1", "sha256:a"), RESULT))
    with pytest.raises(ImageMissing, match=f"Ray node n2 has no image {REF}"):
        dispatching(fake).run(SPEC, ["runner"], OPTIONS)
    assert len(fake.dispatched) == 1


def test_no_capacity_is_no_verdict_naming_the_resource_after_a_bounded_wait():
    stream = Stream(hang=True)
    with pytest.raises(ProviderUnavailable, match="offers the resource 'deepgym_sandbox'.*ray start"):
        dispatching(FakeRay(stream, units=0), capacity_wait_s=0).run(SPEC, ["runner"], OPTIONS)
    assert stream.cancelled


def test_a_started_node_silent_past_the_deadline_is_sandbox_lost(monkeypatch):
    monkeypatch.setattr(provider, "ANSWER_MARGIN_S", 0.0)
    stream = Stream(Started("n2", "sha256:b"))
    fake = FakeRay(stream)

    def wait(streams, timeout):  # the Started answer comes, then nothing
        return (streams, []) if stream.items else ([], streams)

    fake.wait = wait
    with pytest.raises(SandboxLost, match="Ray node n2 gave no answer by the sample's deadline"):
        dispatching(fake).run(SPEC, ["runner"], ExecOptions(timeout_s=0.0))
    assert stream.cancelled


class Elsewhere(Provider):
    """A provider whose images are on its machines: what judging hands it, and a node's answer."""

    name = "ray"
    admission_key = None
    images_elsewhere = True

    def __init__(self, stdout: bytes):
        self.stdout = stdout
        self.specs: list[SandboxSpec] = []

    def image(self, ref):
        raise AssertionError("nothing is resolved on the caller")

    def create(self, spec):
        raise NotImplementedError

    def run(self, spec, argv, options):
        self.specs.append(spec)
        return ExecResult(exit_code=0, stdout=self.stdout, stderr_tail="", timed_out=False, elapsed_s=0.2,
                          node="n7", image_id="sha256:node-local")

    def sweep(self, labels):
        return 0


def test_judging_names_the_image_by_reference_and_hash_and_the_verdict_names_its_node():
    env = load_environment("coin_change")
    request = Request(nonce="n0nce", kind="function", submission="", entry_point="f")
    body = {"outcome": "scored", "score": 1.0, "passed": True, "error_type": None, "details": "d", "cases": [],
            "cases_total": 1, "timings": {}}
    facts = {"wall_s": 1.0, "runner_cpu_s": 0.1, "submission_cpu_s": 0.0, "oom_kills": 0, "cpu_stall_s": None}
    stdout = "".join(event_line("n0nce", name, payload) for name, payload in
                     [(STARTED, None), (IN_PLAY, None), (REPORT, {"report": body}), (DONE, facts)]).encode()
    elsewhere = Elsewhere(stdout)
    images = Images()
    verdict = classify(request, observe(elsewhere, env, request, images), env.id)
    assert verdict.score == 1.0 and verdict.node == "n7" and verdict.image_id == "sha256:node-local"
    assert verdict.image_status == "current" and verdict.to_dict()["node"] == "n7"
    assert elsewhere.specs[0].image == images.ref(env)
    assert elsewhere.specs[0].image_labels == {HASH_LABEL: content_hash("coin_change")}


def test_ray_is_a_mode_and_needs_neither_ray_nor_docker_until_a_sample_is_judged():
    assert "ray" in MODES and make_provider("ray", resource="r1").resource == "r1"
    code = ("import sys; from deepgym import DeepGym; gym = DeepGym(mode='ray'); "
            "print(gym.backend, ' '.join(m for m in ('ray', 'docker') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert shown == ["ray"]


def test_a_cluster_that_does_not_answer_is_daemon_unavailable_at_once(monkeypatch):
    from deepgym import DeepGym

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert not provider.gcs_answers(f"127.0.0.1:{port}")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    if "ray" in sys.modules:  # the cluster tests' driver, connected for the session, would be used instead
        monkeypatch.setattr(sys.modules["ray"], "is_initialized", lambda: False)
    with DeepGym(mode="ray") as gym:
        outcome = gym.judge("coin_change", "```python\ndef coin_change(coins, amount):\n    return 0\n```")
    assert isinstance(outcome, NoVerdictError) and outcome.error_type == "daemon_unavailable"
    assert f"no Ray cluster answers at '127.0.0.1:{port}'" in outcome.reason and "ray start --head" in outcome.reason


def test_a_shutdown_stops_the_wait_and_cancels_the_task(monkeypatch):
    monkeypatch.setattr(provider, "shutdown_requested", lambda: True)
    stream = Stream(Started("n1", "sha256:a"), RESULT, polls=5)
    with pytest.raises(SandboxLost, match="shutting down"):
        dispatching(FakeRay(stream)).run(SPEC, ["runner"], OPTIONS)
    assert stream.cancelled


def test_a_desktop_episode_is_refused_through_ray_before_any_sandbox(monkeypatch):
    """A desktop's supervisor is its sandbox's attached main process, which Ray's episode actor cannot hold:
    refused at once, naming the mode that runs it, with no cluster asked."""
    from deepgym import DeepGym

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")  # nothing answers there: any contact would fail first
    with DeepGym(mode="ray") as gym:
        with pytest.raises(ValueError, match="desktop environments run on local Docker; mode 'ray'.*mode='docker'"):
            gym.session("todo_list")
