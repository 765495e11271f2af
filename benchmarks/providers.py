"""Each remote adapter's cost over docker, against the providers' stand-ins (test doubles of their APIs whose
sandboxes are Docker containers on this engine, tests/providers/standins).

    python benchmarks/providers.py                  # 12 coin_change samples, sequential, every mode
    python benchmarks/providers.py -n 40 --modes docker-exec daytona-standin

For each mode: per-sample judging latency (p50, p95; the reference solution, every verdict checked) and
sandbox create-to-first-exec (create, then one ``true``). What it says: the adapter's own overhead (the SDK's
HTTP, Connect or gRPC round trips, the exec helper's upload and report, a root-only folder made per sandbox) on top of
the same containers that docker mode uses. What it does not say: anything about the real services' latency,
cold starts, image pulls or quotas, which dominate there; the stand-ins answer from 127.0.0.1 and start a
container in well under a second.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path


from deepgym import DeepGym
from deepgym.authoring.check import as_response
from deepgym.environments import load_environment
from deepgym.images import build, image_name
from deepgym.sandbox import ExecOptions, SandboxSpec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "providers"))
MODES = ("docker-attach", "docker-exec", "daytona-standin", "e2b-standin", "modal-standin")


def start_mode(mode: str, stack: ExitStack, scratch: Path) -> DeepGym:
    """A client for ``mode``, its stand-in started and its images registered."""
    if mode.startswith("docker"):
        os.environ["DEEPGYM_DOCKER_EXEC"] = "1" if mode == "docker-exec" else "0"
        return stack.enter_context(DeepGym(mode="docker"))
    from standins import publish

    from deepgym.registration import register

    name = mode.removesuffix("-standin")
    if mode == "daytona-standin":
        from standins.daytona import DaytonaStandIn

        server = DaytonaStandIn().start()
        settings = {"DAYTONA_API_KEY": server.api_key, "DAYTONA_API_URL": server.api_url, "DAYTONA_TARGET": "us"}
    elif mode == "e2b-standin":
        from standins.e2b import E2BStandIn

        server = E2BStandIn().start()
        settings = {"E2B_API_KEY": server.api_key, "E2B_API_URL": server.url, "E2B_SANDBOX_URL": server.url}
    elif mode == "modal-standin":
        from standins.modal import ModalStandIn

        server = ModalStandIn().start()
        settings = {"MODAL_SERVER_URL": server.url, "MODAL_TOKEN_ID": server.token_id,
                    "MODAL_TOKEN_SECRET": server.token_secret}
    else:
        raise SystemExit(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
    stack.callback(server.stop)
    os.environ.update(settings)
    register(name, ["base", "coin_change"], publish(server, ["base", "coin_change"], scratch / "pushed.json"))
    return stack.enter_context(DeepGym(mode=name))


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"p50 {statistics.median(values) * 1000:7.0f} ms  p95 {p95 * 1000:7.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=12, help="samples per mode (default 12)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = parser.parse_args()
    build(["coin_change"])
    env = load_environment("coin_change")
    right = as_response(env, env.solutions()["reference"].read_text())
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"{args.n} sequential coin_change samples per mode")
    import tempfile

    for mode in args.modes:
        with ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
            gym = start_mode(mode, stack, Path(scratch))
            base = gym.provider.image(image_name("base")).id
            gym.run(env, right)  # warm: images resolved, connections open
            judged = []
            for _ in range(args.n):
                started = time.perf_counter()
                verdict = gym.run(env, right)
                judged.append(time.perf_counter() - started)
                assert verdict.passed, verdict.to_dict()
            first_exec = []
            for _ in range(max(3, args.n // 2)):
                started = time.perf_counter()
                with gym.provider.create(SandboxSpec(image=base)) as box:
                    assert box.exec(["true"], ExecOptions(timeout_s=30)).exit_code == 0
                    first_exec.append(time.perf_counter() - started)
            print(f"{mode:<16} judge {quantiles(judged)}   create→first exec {quantiles(first_exec)}")


if __name__ == "__main__":
    main()
