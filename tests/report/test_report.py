"""`deepgym report`, rendered in a real browser (headless Chromium): a run-batch results page, a page from a log
of verl's reward extras, and a recorded desktop episode's page. Each page's screenshot is not blank and shows
the expected counts: the summary bar's colours are measured in pixels, the totals read from the browser's DOM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.authoring.replay import action_sequences
from deepgym.environments import load_environment
from deepgym.images import build
from deepgym.integrations.verl import compute_score
from deepgym.outcome import NoVerdictError
from deepgym.report import Recorder, render, write
from deepgym.report.charts import MIX_COLORS
from support import ROOT, ensure_images, fenced, solution

from .browser import dom, pixels, rgb, screenshot

RIGHT = fenced(solution("coin_change", "reference"))
WRONG = fenced("def coin_change(coins, amount):\n    return -1\n")
PROSE = "Use dynamic programming."
BAR_WIDTH, BAR_HEIGHT, SWATCH = 1000, 30, 11 * 11


def deepgym_cli(*argv: str, tag: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if tag is not None:
        env["DEEPGYM_TAG"] = tag
    return subprocess.run([sys.executable, "-m", "deepgym.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=600)


def summary_bar_shows(shot: Path, passed: int, failed: int, unjudged: int) -> None:
    """The summary bar's three colours cover the screenshot in proportion to the counts (each also has one legend
    swatch), to the pixel column."""
    counts = pixels(shot)
    assert len(counts) > 20, "the screenshot is blank"
    total = passed + failed + unjudged
    for name, count in zip(MIX_COLORS, (passed, failed, unjudged)):
        drawn = counts[rgb(MIX_COLORS[name])] - (SWATCH if count else 0)
        assert abs(drawn - BAR_WIDTH * BAR_HEIGHT * count / total) <= 2 * BAR_HEIGHT, (name, drawn, count)


@pytest.mark.docker
def test_results_page_of_run_batch_output(tmp_path: Path):
    ensure_images("coin_change")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in [RIGHT] * 5 + [WRONG] * 3 + [PROSE] * 2))
    judged = deepgym_cli("run-batch", "coin_change", "--responses", str(responses))
    assert judged.returncode == 0, judged.stderr
    # The same responses against an image that was never built: no verdict, except the prose (nothing to run).
    unbuilt = deepgym_cli("run-batch", "coin_change", "--responses", str(responses), tag="never-built-report")
    assert unbuilt.returncode == 3, unbuilt.stderr
    results = tmp_path / "results.jsonl"
    results.write_text(judged.stdout + unbuilt.stdout)

    made = deepgym_cli("report", str(results), "-o", str(tmp_path / "report.html"))
    assert made.returncode == 0, made.stderr
    page = tmp_path / "report.html"
    assert "<script" not in page.read_text() and "http" not in page.read_text().split("<body>", 1)[1]
    shown = dom(page)
    assert "<b>20</b> samples" in shown and "<b>5</b> passed, <b>7</b> failed, <b>8</b> no verdict" in shown
    assert "image_missing <b>8</b>" in shown and "wrong_answer <b>3</b>" in shown and "no_code_block <b>4</b>" in shown
    assert "<th class=\"n\">wait p50 s</th>" in shown  # run-batch judges under admission: each verdict's wait
    summary_bar_shows(screenshot(page), passed=5, failed=7, unjudged=8)


def test_the_latency_table_shows_the_admission_wait_apart(tmp_path: Path):
    # total_s is the sandbox's run; admission_wait_s the queueing before it: each its own columns, per environment.
    def line(env: str, total: float, wait: float | None) -> str:
        timings = {"total_s": total} if wait is None else {"total_s": total, "admission_wait_s": wait}
        return json.dumps({"has_verdict": True, "passed": True, "score": 1.0, "environment": env,
                           "timings": timings}) + "\n"

    results = tmp_path / "results.jsonl"
    results.write_text("".join([line("queued", 0.2, wait) for wait in (0.0, 1.0, 3.0)] + [line("unqueued", 0.4, None)]))
    page = render(results)
    assert "wait p50 s</th><th class=n>wait p99 s</th>" in page
    assert "<td>queued</td><td class=n>3</td><td class=n>0.200</td>" in page
    assert "<td class=n>0.200</td><td class=n>1.000</td><td class=n>3.000</td></tr>" in page  # max s, then the waits
    assert "<td class=n>0.400</td><td class=n>-</td><td class=n>-</td></tr>" in page
    results.write_text(line("unqueued", 0.4, None))
    assert "wait p50 s" not in render(results)  # lines without the timing (older output) keep the old table


def verl_extras(response: str, step: int) -> dict:
    """What verl logs for one sample: compute_score's dict, or the agent loop's for a sample kept out (no
    verdict), with the training step."""
    try:
        extras = compute_score("coin_change", response, extra_info={"environment": "coin_change"}, mode="docker")
    except NoVerdictError as exc:
        extras = {"score": 0.0, "passed": 0.0, "error": 1.0, "error_type": exc.error_type}
    return {**extras, "step": step, "data_source": "coin_change"}


@pytest.mark.docker
def test_results_page_of_verl_extras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ensure_images("coin_change")
    lines = [verl_extras(response, step) for step, response in enumerate([RIGHT, RIGHT, WRONG, PROSE])]
    monkeypatch.setenv("DEEPGYM_TAG", "never-built-report")
    lines += [verl_extras(RIGHT, step) for step in (4, 5)]
    rollouts = tmp_path / "rollouts"  # verl's rollout_data_dir: one STEP.jsonl per step
    rollouts.mkdir()
    for line in lines:
        (rollouts / f"{line['step']}.jsonl").write_text(json.dumps(line) + "\n" + ("not json\n" if line["step"] == 5
                                                                                 else ""))
    page = write(rollouts, tmp_path / "verl.html")
    shown = dom(page)
    assert "<b>6</b> samples" in shown and "<b>2</b> passed, <b>2</b> failed, <b>2</b> no verdict" in shown
    assert "x: training step" in shown and "1 line(s) were not samples" in shown
    summary_bar_shows(screenshot(page), passed=2, failed=2, unjudged=2)


@pytest.mark.docker
@pytest.mark.desktop
def test_recorded_desktop_episode_steps_through_in_a_browser(tmp_path: Path):
    build(["todo_list"])
    actions = action_sequences(load_environment("todo_list"), "reference")[0]
    with DeepGym(mode="docker") as gym, gym.session("todo_list", variant=0) as session:
        episode = Recorder(session)
        episode.start()
        for action in actions:
            episode.step(action)
        assert episode.score().score == 1.0
        recording = episode.save(tmp_path / "episode.json")
    page = write(recording, tmp_path / "episode.html")
    assert "src=\"http" not in page.read_text() and "<script src" not in page.read_text()
    frames = len(actions) + 1
    assert f"<b>{frames}</b> frames, <b>{len(actions)}</b> actions; score 1.0, passed" in dom(page)
    first = pixels(screenshot(page, (1100, 1000)))
    assert len(first) > 50, "the first frame's screenshot is blank"
    last = pixels(screenshot(page, (1100, 1000), fragment=f"frame-{frames - 1}"))  # stepped to the last frame
    assert len(last) > 50 and last != first, "stepping to the last frame showed the first screen again"


def test_a_file_of_no_samples_is_bad_usage(tmp_path: Path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"summary": {"samples": 0}}\nnot json\n')
    refused = deepgym_cli("report", str(empty), "-o", str(tmp_path / "page.html"))
    assert refused.returncode == 2 and "holds no samples" in refused.stderr
    missing = deepgym_cli("report", str(tmp_path / "absent.jsonl"), "-o", str(tmp_path / "page.html"))
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
    assert not (tmp_path / "page.html").exists()
