"""deepgym's reward function as verl loads and calls it: verl's get_custom_reward_fn with a pkg:// path and
reward_kwargs, and verl's own naive and dapo reward managers on rows written by verl_rows."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys

import pytest

pytestmark = pytest.mark.verl

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager  # noqa: E402
from verl_fakes import without_provenance  # noqa: E402
from verl_fakes import EOS, EOS_ID, LineTokenizer, fenced, solution  # noqa: E402

from deepgym import NoVerdictError  # noqa: E402
from deepgym.integrations.verl import (  # noqa: E402
    REWARD_KEYS,
    make_verl_compute_score,
    make_verl_reward_fn,
    verl_rows,
)

RIGHT = fenced(solution("coin_change", "reference")) + EOS
WRONG = fenced(solution("coin_change", "wrong_greedy"))
PROSE = "I would use dynamic programming over the amounts."


def reward_config(mode: str, manager: str = "naive", **reward_kwargs):
    return OmegaConf.create({"reward": {
        "custom_reward_function": {"path": "pkg://deepgym.integrations.verl", "name": "compute_score",
                                   "reward_kwargs": {"mode": mode}},
        "reward_manager": {"source": "register", "name": manager, "module": {"path": None, "name": "unused"}},
        "reward_kwargs": reward_kwargs}})


def call_as_verl(fn, response: str, row: dict, **extra):
    """The keyword call verl's reward managers make."""
    return fn(data_source=row["data_source"], solution_str=response, ground_truth=row["reward_model"]["ground_truth"],
              extra_info=dict(row["extra_info"]), **extra)


def coin_change_row() -> dict:
    return verl_rows(["coin_change"])[0]


def test_importing_deepgym_and_the_reward_module_pulls_in_neither_verl_nor_docker():
    code = ("import sys, deepgym, deepgym.integrations.verl, deepgym.integrations.dapo, deepgym.cli\n"
            "deepgym.cli.parser()\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'verl', 'docker', 'torch', 'pandas', 'ray'})\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("mode", ["kubernetes", "podman"])
def test_a_mode_deepgym_cannot_run_is_a_clear_error(mode):
    fn = get_custom_reward_fn(reward_config(mode))
    with pytest.raises(ValueError) as info:
        call_as_verl(fn, RIGHT, coin_change_row())
    message = str(info.value)
    assert repr(mode) in message and "auto, docker, local, daytona, e2b, modal, apple" in message


@pytest.mark.docker
def test_compute_score_loaded_by_verl_with_pkg_path_and_reward_kwargs(coin_change_image):
    fn = get_custom_reward_fn(reward_config("docker"))
    row = coin_change_row()
    # A keyword verl adds (reward_router_address) is accepted; reward_kwargs win over call-time keywords.
    right = call_as_verl(fn, RIGHT, row, reward_router_address=None, mode="daytona")
    wrong = call_as_verl(fn, WRONG, row)
    prose = call_as_verl(fn, PROSE, row)
    assert without_provenance(right) == {"score": 1.0, "passed": 1.0, "error": 0.0, "error_type": ""}
    assert without_provenance(wrong) == {"score": 0.0, "passed": 0.0, "error": 0.0, "error_type": "wrong_answer"}
    assert without_provenance(prose) == {"score": 0.0, "passed": 0.0, "error": 0.0, "error_type": "no_code_block"}
    assert all(tuple(result) == REWARD_KEYS for result in (right, wrong, prose))
    assert json.loads(right["provenance"])["environment"] == "coin_change" and prose["provenance"] == "{}"


@pytest.mark.docker
def test_no_verdict_raises_and_says_what_verl_does_with_it(coin_change_image, monkeypatch):
    monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
    fn = get_custom_reward_fn(reward_config("docker"))
    with pytest.raises(NoVerdictError) as info:
        call_as_verl(fn, RIGHT, coin_change_row())
    error = info.value
    assert error.error_type == "image_missing" and not error.has_verdict
    message = str(error)
    for needle in ("v1", "drops", "legacy", "stops", "deepgym verl agent-loop-config", "deepgym_single_turn"):
        assert needle in message
    # It crosses from verl's reward workers (Ray actors) to the rollout, so it must survive pickling.
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, NoVerdictError) and copy.error_type == "image_missing" and str(copy) == message


# A Qwen3 response under a template that put <think> in the prompt, cut off mid-reasoning: its draft is right.
CUT_OFF_REASONING = (f"Okay, dynamic programming over the totals:\n\n```python\n{solution('coin_change', 'reference')}"
                     "```\n\nWait, let me check the loop order. If I iterate")
CLOSED_REASONING = "Okay, a draft:\n" + fenced(solution("coin_change", "wrong_greedy")) + "</think>\n\n" + RIGHT


@pytest.mark.docker
def test_reasoning_open_from_reward_kwargs_gives_a_cut_off_reasoning_no_answer(coin_change_image):
    open_fn = get_custom_reward_fn(OmegaConf.merge(reward_config("docker"), {"reward": {"custom_reward_function": {
        "reward_kwargs": {"reasoning": "open"}}}}))
    auto_fn = get_custom_reward_fn(reward_config("docker"))
    row = coin_change_row()
    assert without_provenance(call_as_verl(open_fn, CUT_OFF_REASONING, row)) == {"score": 0.0, "passed": 0.0, "error": 0.0,
                                                             "error_type": "no_code_block"}
    assert call_as_verl(open_fn, CLOSED_REASONING, row)["score"] == 1.0
    assert call_as_verl(auto_fn, CUT_OFF_REASONING, row)["score"] == 1.0  # auto: no tag, so the draft is the answer
    bound = make_verl_compute_score("coin_change", mode="docker", reasoning="open")
    assert call_as_verl(bound, CUT_OFF_REASONING, row)["error_type"] == "no_code_block"
    assert call_as_verl(bound, CUT_OFF_REASONING, row, reasoning="auto")["score"] == 1.0  # reward_kwargs override
    assert make_verl_reward_fn("coin_change", mode="docker", reasoning="open")([CUT_OFF_REASONING]) == [0.0]


def test_an_unknown_reasoning_setting_is_a_clear_error():
    fn = get_custom_reward_fn(OmegaConf.merge(reward_config("docker"), {"reward": {"custom_reward_function": {
        "reward_kwargs": {"reasoning": "closed"}}}}))
    with pytest.raises(ValueError, match="'closed'.*valid settings: auto, open"):
        call_as_verl(fn, RIGHT, coin_change_row())
    with pytest.raises(ValueError, match="valid settings: auto, open"):
        make_verl_compute_score("coin_change", reasoning="none")


def data_proto(tokenizer: LineTokenizer, row: dict, response: str) -> DataProto:
    """One sample as verl's agent-loop worker hands it to a reward manager."""
    prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True)
    ids = tokenizer.encode(response) + [EOS_ID]
    batch = TensorDict({"prompts": torch.tensor([prompt]), "responses": torch.tensor([ids + [0, 0]]),
                        "attention_mask": torch.tensor([[1] * (len(prompt) + len(ids)) + [0, 0]])}, batch_size=1)
    non_tensor = {key: np.array([row[key]], dtype=object) for key in ("data_source", "reward_model", "extra_info")}
    non_tensor["__num_turns__"] = np.array([2])
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


@pytest.mark.docker
@pytest.mark.parametrize("manager", ["naive", "dapo"])
def test_verl_reward_managers_score_real_rows(manager, coin_change_image, monkeypatch):
    extra = {}
    if manager == "dapo":  # DAPO's overlong shaping, with a buffer no answer here reaches
        extra = {"overlong_buffer_cfg": {"enable": True, "len": 64, "penalty_factor": 1.0, "log": True},
                 "max_resp_len": 256}
    config = reward_config("docker", manager, **extra)
    tokenizer = LineTokenizer()
    row = dict(coin_change_row())

    async def score(response: str):
        reward_manager = load_reward_manager(config, tokenizer)
        return await reward_manager.run_single(data_proto(tokenizer, row, response))

    right = asyncio.run(score(RIGHT))
    wrong = asyncio.run(score(WRONG))
    assert right["reward_score"] == 1.0 and wrong["reward_score"] == 0.0
    for result in (right, wrong):
        assert set(REWARD_KEYS) <= set(result["reward_extra_info"])
    assert right["reward_extra_info"]["passed"] == 1.0 and wrong["reward_extra_info"]["error_type"] == "wrong_answer"
    if manager == "dapo":
        assert float(right["reward_extra_info"]["overlong_reward"]) == 0.0

    # No verdict: the error comes out of verl's reward manager unchanged (v1 then drops the sample).
    monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
    with pytest.raises(NoVerdictError, match="image_missing"):
        asyncio.run(score(RIGHT))


@pytest.mark.docker
def test_bound_compute_score_and_batch_reward_fn(coin_change_image, monkeypatch):
    compute_score = make_verl_compute_score("coin_change", mode="docker")
    # The bound function ignores the row's environment: it always judges coin_change.
    assert compute_score(data_source="something_else", solution_str=RIGHT, ground_truth=None,
                         extra_info={"environment": "something_else"})["score"] == 1.0

    reward_fn = make_verl_reward_fn("coin_change", mode="docker")
    assert reward_fn({"responses": [RIGHT, WRONG, PROSE]}) == [1.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="decode"):
        reward_fn([[101, 102]])
    monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
    assert reward_fn([RIGHT, PROSE]) == [None, 0.0]


@pytest.mark.docker
def test_one_client_per_mode_is_shared_by_verls_reward_threads(coin_change_image):
    from concurrent.futures import ThreadPoolExecutor

    from deepgym.integrations.verl import compute_score, get_client

    row = coin_change_row()

    def score(_: int):
        result = compute_score(row["data_source"], RIGHT, extra_info=row["extra_info"], mode="docker")
        return result["score"], get_client("docker")

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(score, range(4)))
    assert [s for s, _ in results] == [1.0] * 4
    assert len({id(client) for _, client in results}) == 1
    assert get_client("auto") is not get_client("docker")  # one per mode


@pytest.mark.docker
def test_acompute_score_is_awaited_by_verls_reward_manager_without_a_thread_per_waiting_sample(coin_change_image,
                                                                                              monkeypatch):
    """``name: acompute_score``: verl's naive manager awaits it on its event loop. 12 samples at once at an
    admission bound of 2 are judged right by at most 2 of deepgym's threads."""
    import threading

    monkeypatch.setenv("DEEPGYM_MAX_SANDBOXES", "2")
    config = OmegaConf.merge(reward_config("docker"), {"reward": {"custom_reward_function": {"name": "acompute_score"}}})
    tokenizer = LineTokenizer()
    row = dict(coin_change_row())
    judging: list[int] = []

    async def score_all():
        reward_manager = load_reward_manager(config, tokenizer)
        assert reward_manager.is_async_reward_score
        jobs = [asyncio.ensure_future(reward_manager.run_single(data_proto(tokenizer, row, response)))
                for response in [RIGHT, WRONG] * 6]
        while not all(job.done() for job in jobs):
            judging.append(sum(t.name.startswith("deepgym-async") for t in threading.enumerate()))
            await asyncio.sleep(0.01)
        return await asyncio.gather(*jobs)

    results = asyncio.run(score_all())
    assert [r["reward_score"] for r in results] == [1.0, 0.0] * 6
    assert max(judging) <= 2
