"""What every row of benchmarks/throughput.py shares: each environment's samples, the timing of a row, and the
rows of the bare engine (``engine``, ``engine-defaults``, ``engine-bare``, ``engine-runner``), which run no
deepgym client at all. throughput.py's docstring says what each row measures."""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from deepgym import load_environment
from deepgym.authoring.check import as_response
from deepgym.images import image_name

import floors


def solutions(env_name: str, n: int) -> list[tuple[str, bool]]:
    """N (code, is right) pairs: the reference and each known-wrong solution in turn (the dataset row's:
    responses, right and wrong in turn)."""
    if env_name == floors.ROW:
        return floors.row_samples(n)
    env = load_environment(env_name)
    found = env.solutions()
    wrong = sorted(name for name in found if name.startswith("wrong_"))
    return [(found["reference"].read_text(), True) if i % 2 == 0 else (found[wrong[i // 2 % len(wrong)]].read_text(),
                                                                         False) for i in range(n)]


def host_cpu_s() -> float:
    """Busy CPU seconds of the whole host so far (user, nice, system, irq, softirq)."""
    fields = open("/proc/stat").readline().split()[1:8]
    return (sum(map(int, fields[:3])) + int(fields[5]) + int(fields[6])) / os.sysconf("SC_CLK_TCK")


def p95(values: list[float]) -> float | None:
    """The 95th percentile of ``values`` (nearest rank below), or None when there are none."""
    values = sorted(values)
    return values[int(0.95 * (len(values) - 1))] if values else None


def timed(judge, samples: list, parallel: int) -> dict[str, float]:
    """Run ``judge(sample) -> right`` over ``samples`` ``parallel`` at a time; the row's figures."""
    def one(sample) -> tuple[float, bool]:
        started = time.perf_counter()
        right = judge(sample)
        return time.perf_counter() - started, right

    cpu0, started = host_cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(one, samples))
    elapsed, cpu = time.perf_counter() - started, host_cpu_s() - cpu0
    latencies = [latency for latency, _ in results]
    return {"samples_per_s": len(samples) / elapsed, "p50_s": statistics.median(latencies),
            "p95_s": p95(latencies), "cpu_s": cpu / len(samples),
            "wrong_verdicts": sum(not ok for _, ok in results)}


def run_engine(env: str, n: int, parallel: int, bare_verifier: bool = False) -> dict[str, float]:
    """The bare engine: what docker-py and the engine need for a container like a sandbox, and nothing else.
    With ``bare_verifier`` (the ``engine-bare`` row), each container runs the bare verifier (:mod:`floors`) on its sample instead of
    ``true``: the least any verifier in a container can add, one interpreter and the solution's own work."""
    import docker

    from deepgym.environments import sandbox_spec
    from deepgym.sandbox.docker import API_VERSION, container_settings

    environment = load_environment(env)
    api = docker.APIClient(**docker.utils.kwargs_from_env(), version=API_VERSION, max_pool_size=parallel + 4)
    spec = sandbox_spec(environment, api.inspect_image(image_name(env))["Id"])
    samples: list = solutions(env, n) if bare_verifier else [("", True)] * n

    def create(sample: tuple[str, bool]) -> str:
        entrypoint = ["python3", *floors.bare_argv(environment, sample[0], True)] if bare_verifier else ["true"]
        settings = container_settings(api, spec, {"deepgym-benchmark": "engine"}, attached=True)
        return api.create_container(spec.image, entrypoint=entrypoint, command=[], **settings)["Id"]

    return engine_loop(api, create, samples, parallel)


def run_engine_defaults(env: str, n: int, parallel: int) -> dict[str, float]:
    """The bare engine loop with docker-py's defaults: ``true`` in a container of the image, nothing set."""
    import docker

    api = docker.APIClient(**docker.utils.kwargs_from_env(), max_pool_size=parallel + 4)
    image = api.inspect_image(image_name(env))["Id"]
    return engine_loop(api, lambda _: api.create_container(image, entrypoint=["true"], command=[], labels={
        "deepgym-benchmark": "engine-defaults"})["Id"], [("", True)] * n, parallel)


def engine_loop(api, create, samples: list[tuple[str, bool]], parallel: int) -> dict[str, float]:
    """Per sample, ``create(sample)`` a container, start it, wait for it and remove it; a sample is right when
    the container exits 0 exactly for a right sample. Closes ``api``."""
    def judge(sample: tuple[str, bool]) -> bool:
        container = create(sample)
        try:
            api.start(container)
            return (api.wait(container)["StatusCode"] == 0) == sample[1]
        finally:
            api.remove_container(container, force=True)

    try:
        judge(samples[0])
        return timed(judge, samples, parallel)
    finally:
        api.close()


def run_engine_runner(env: str, n: int, parallel: int) -> dict[str, float]:
    """The bare engine loop doing a sample's work: create + attach + start a container whose main process is
    the runner, send the request, read the report, wait, remove; the report is classified as deepgym does."""
    import secrets
    import socket

    import docker
    from docker.utils.socket import consume_socket_output, demux_adaptor, frames_iter

    from deepgym.environments import sandbox_spec
    from deepgym.extract import submission
    from deepgym.judging import runner_exit
    from deepgym.runner.protocol import Request
    from deepgym.sandbox.base import IMAGE_RUNNER, ExecResult
    from deepgym.sandbox.docker import API_VERSION, container_settings
    from deepgym.verdict import RunFacts, classify

    environment = load_environment(env)
    api = docker.APIClient(**docker.utils.kwargs_from_env(), version=API_VERSION, max_pool_size=parallel + 4)
    spec = sandbox_spec(environment, api.inspect_image(image_name(env))["Id"])
    samples = [(as_response(environment, code), right) for code, right in solutions(env, n)]

    def judge(sample: tuple[str, bool]) -> bool:
        request = Request(nonce=secrets.token_hex(16), kind=environment.kind,
                          submission=submission(environment, sample[0], "auto"), entry_point=environment.entry_point,
                          variant=0, scoring=environment.scoring, limits=environment.limits, tests=None)
        settings = container_settings(api, spec, {"deepgym-benchmark": "engine-runner"}, attached=True)
        container = api.create_container(spec.image, entrypoint=list(IMAGE_RUNNER),
                                         command=[], stdin_open=True, detach=False, **settings)["Id"]
        try:
            stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            sock = getattr(stream, "_sock", stream)
            api.start(container)
            sock.sendall(request.to_json().encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            frames = (demux_adaptor(*frame) for frame in frames_iter(stream, tty=False))
            stdout, stderr = consume_socket_output(frames, demux=True)
            stream.close()
            status = api.wait(container)["StatusCode"]
        finally:
            api.remove_container(container, force=True)
        observation = RunFacts(runtime="docker", exit_code=runner_exit(ExecResult(status, b"", "", False, 0.0)), stdout=stdout or b"",
                                  stderr_tail=(stderr or b"").decode(errors="replace")[-2000:])
        outcome = classify(request, observation, env)
        return outcome.has_verdict and (outcome.score == 1.0) == sample[1]

    try:
        judge(samples[0])
        return timed(judge, samples, parallel)
    finally:
        api.close()
