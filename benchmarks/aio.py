"""The async API against the sync one: N coin_change responses (half right, half wrong) offered at once.

    python benchmarks/aio.py                          # 200 responses, admission bound 2
    python benchmarks/aio.py -n 400 --bound 4

Rows: ``run_batch`` with one thread per sample (``max_parallel=N``, what a naive caller does) and
``arun_batch`` (every sample a coroutine until admitted). Figures: samples/s, the most threads alive at once
beyond those before the run, and the event loop's longest stall (a 10 ms heartbeat's largest gap; the sync
row has no loop). Every verdict must be right, so a fast but wrong run cannot pass for a good one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import machine  # noqa: E402

from deepgym import DeepGym, load_environment  # noqa: E402
from deepgym.images import build  # noqa: E402


def responses(n: int) -> tuple[list[str], list[float]]:
    folder = load_environment("coin_change").path / "solutions"
    right = f"```python\n{(folder / 'reference.py').read_text()}\n```"
    wrong = f"```python\n{(folder / 'wrong_impossible_is_zero.py').read_text()}\n```"
    texts = [right if index % 2 == 0 else wrong for index in range(n)]
    return texts, [1.0 if index % 2 == 0 else 0.0 for index in range(n)]


def watch_threads(stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], threading.active_count())
        time.sleep(0.01)


def sync_row(texts: list[str], bound: int) -> tuple[float, int, float | None, list]:
    peak, stop = [threading.active_count()], threading.Event()
    before = peak[0]
    watcher = threading.Thread(target=watch_threads, args=(stop, peak))
    watcher.start()
    with DeepGym(mode="docker", max_sandboxes=bound, max_parallel=bound) as gym:
        started = time.monotonic()
        batch = gym.run_batch("coin_change", texts, max_parallel=len(texts))
        elapsed = time.monotonic() - started
    stop.set()
    watcher.join()
    return elapsed, peak[0] - before - 1, None, list(batch)


def async_row(texts: list[str], bound: int) -> tuple[float, int, float | None, list]:
    gaps, peak = [0.0], [threading.active_count()]
    before = peak[0]

    async def heartbeat(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps[0], last = max(gaps[0], now - last), now
            peak[0] = max(peak[0], threading.active_count())

    async def main(gym: DeepGym):
        stop = asyncio.Event()
        beat = asyncio.ensure_future(heartbeat(stop))
        try:
            return await gym.arun_batch("coin_change", texts)
        finally:
            stop.set()
            await beat

    with DeepGym(mode="docker", max_sandboxes=bound, max_parallel=bound) as gym:
        started = time.monotonic()
        batch = asyncio.run(main(gym))
        elapsed = time.monotonic() - started
    return elapsed, peak[0] - before, gaps[0], list(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="responses offered at once")
    parser.add_argument("--bound", type=int, default=2, help="the admission bound (max_sandboxes)")
    args = parser.parse_args()
    build(["coin_change"])
    texts, expected = responses(args.n)
    print(f"machine: {machine()}; {args.n} coin_change responses at once, admission bound {args.bound}")
    print(f"{'row':<12} {'samples/s':>9} {'threads':>8} {'loop stall':>10}  right")
    for name, row in (("run_batch", sync_row), ("arun_batch", async_row)):
        elapsed, threads, stall, outcomes = row(texts, args.bound)
        right = sum(getattr(o, "score", None) == want for o, want in zip(outcomes, expected))
        stall_text = "-" if stall is None else f"{stall * 1000:.0f} ms"
        print(f"{name:<12} {len(texts) / elapsed:>9.2f} {threads:>8} {stall_text:>10}  {right}/{len(texts)}")


if __name__ == "__main__":
    main()
