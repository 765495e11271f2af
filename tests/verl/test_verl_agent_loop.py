"""DeepGymSingleTurnAgentLoop built by hydra from the packaged YAML, as verl's AgentLoopWorker builds it, run on
a row from verl's RLHFDataset with a scripted model and real containers."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings

import pytest

pytestmark = pytest.mark.verl

from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop  # noqa: E402
from verl_fakes import without_provenance  # noqa: E402
from verl_fakes import (  # noqa: E402
    LineTokenizer,
    ScriptedServer,
    copy_loop_entry,
    fenced,
    instantiate_loop,
    loop_config,
    run_loop,
    solution,
)

from deepgym import NoVerdictError  # noqa: E402
from deepgym.integrations.verl import REWARD_KEYS, kept_out  # noqa: E402
from deepgym.integrations.verl_mask import DeepGymSingleTurnAgentLoop, kept_out_count  # noqa: E402

RIGHT = fenced(solution("coin_change", "reference"))
WRONG = fenced(solution("coin_change", "wrong_impossible_is_zero"))
DEEPGYM_REWARD = {"reward_path": "pkg://deepgym.integrations.verl", "reward_kwargs": {"mode": "docker"}}
DEAD_ENGINE = "unix:///nonexistent/deepgym-test-docker.sock"
BLOCK_WARNING = "were kept out of training"  # the loop's monitor; the client warns about no verdicts too


def response_tokens(text: str) -> int:
    return len(LineTokenizer().encode(text)) + 1  # and the end-of-turn token


def test_the_packaged_yaml_builds_deepgyms_loop():
    async def build():
        return instantiate_loop(loop_config(use_v1=True), ScriptedServer(LineTokenizer(), "x"))

    loop = asyncio.run(build())
    assert type(loop) is DeepGymSingleTurnAgentLoop and isinstance(loop, SingleTurnAgentLoop)
    assert loop.mode == "auto" and loop.reasoning is None


def test_deepgyms_own_reward_function_is_awaited_as_its_async_twin():
    """Configured as verl's reward function (or by default), deepgym's compute_score runs in the loop as
    acompute_score: awaited on verl's event loop, not in a thread of its executor."""
    import inspect

    async def build(config):
        return instantiate_loop(config, ScriptedServer(LineTokenizer(), "x"))

    for config in (loop_config(use_v1=True, **DEEPGYM_REWARD), loop_config(use_v1=True)):
        assert inspect.iscoroutinefunction(asyncio.run(build(config)).reward_fn)


def test_a_configured_custom_reward_function_scores_the_sample(dataset_row, tmp_path):
    module = tmp_path / "my_reward.py"
    module.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                      "    right_call = kwargs['scale'] == 'quarter' and 'def coin_change' in solution_str\n"
                      "    return 0.25 if right_call else -1.0\n")
    config = loop_config(use_v1=True, reward_path=str(module), reward_kwargs={"scale": "quarter"})
    [output] = run_loop(config, dataset_row, RIGHT)
    assert output.reward_score == 0.25
    assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 0.25, "passed": 0.0, "error": 0.0, "error_type": ""}


@pytest.mark.docker
@pytest.mark.parametrize("use_v1", [True, False])
def test_right_answer_earns_1_and_wrong_answer_0_both_trained_on(use_v1, dataset_row, coin_change_image):
    right, wrong = run_loop(loop_config(use_v1=use_v1, **DEEPGYM_REWARD), dataset_row, RIGHT, WRONG)
    assert right.reward_score == 1.0
    assert without_provenance(right.extra_fields["reward_extra_info"]) == {"score": 1.0, "passed": 1.0, "error": 0.0, "error_type": ""}
    assert wrong.reward_score == 0.0
    assert without_provenance(wrong.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 0.0,
                                                       "error_type": "wrong_answer"}
    for output, text in ((right, RIGHT), (wrong, WRONG)):
        assert output.response_mask == [1] * response_tokens(text)  # every generated token is trained on


# A Qwen3 response under a template that put <think> in the prompt, cut off mid-reasoning: its draft is right.
CUT_OFF_REASONING = "Okay, dynamic programming over the totals:\n\n" + RIGHT + "\nWait, let me check the loop order"
CLOSED_REASONING = "Okay, a draft:\n" + WRONG + "</think>\n\n" + RIGHT


@pytest.mark.docker
@pytest.mark.parametrize("reward,cut_off_score", [
    pytest.param({}, 0.0, id="the-loops-compute-score"),
    pytest.param(DEEPGYM_REWARD, 0.0, id="passed-to-the-custom-reward-function"),
    pytest.param({**DEEPGYM_REWARD, "reward_kwargs": {"mode": "docker", "reasoning": "auto"}}, 1.0,
                 id="reward-kwargs-take-precedence"),
])
def test_reasoning_open_in_the_loop_entry(reward, cut_off_score, dataset_row, coin_change_image):
    name = copy_loop_entry("deepgym_reasoning_open", mode="docker", reasoning="open")
    cut_off, closed = run_loop(loop_config(use_v1=True, **reward), dataset_row, CUT_OFF_REASONING, CLOSED_REASONING,
                               name=name)
    assert cut_off.reward_score == cut_off_score
    if cut_off_score == 0.0:  # no answer: the model's fault, scored and trained on
        assert without_provenance(cut_off.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 0.0,
                                                             "error_type": "no_code_block"}
    assert cut_off.response_mask == [1] * response_tokens(CUT_OFF_REASONING)
    assert closed.reward_score == 1.0


def test_an_unknown_reasoning_in_the_loop_entry_fails_when_verl_builds_the_loop():
    name = copy_loop_entry("deepgym_reasoning_unknown", reasoning="closed")

    async def build():
        return instantiate_loop(loop_config(use_v1=True), ScriptedServer(LineTokenizer(), "x"), name)

    with pytest.raises(Exception, match="'closed'.*valid settings: auto, open"):
        asyncio.run(build())


def patch_environment() -> str | None:
    from deepgym.environments import list_environments, load_environment

    return next((name for name in list_environments() if load_environment(name).kind == "patch"), None)


@pytest.mark.docker
def test_a_bad_patch_is_the_models_fault_scored_0_and_trained_on():
    name = patch_environment()
    if name is None:
        pytest.skip("no patch environment in this checkout")
    from deepgym.images import build
    from deepgym.integrations.verl import verl_rows

    build([name])
    row = verl_rows([name])[0]
    row["raw_prompt"] = row["prompt"]
    patches = {
        "invalid_patch": "```diff\nthis is not a diff\n```",
        "patch_apply_failed": "```diff\n--- a/no_such_file.py\n+++ b/no_such_file.py\n@@ -1 +1 @@\n-x\n+y\n```",
        "test_infra_tampering": "```diff\n--- a/tests/conftest.py\n+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+x = 1\n```",
    }
    outputs = run_loop(loop_config(use_v1=True, **DEEPGYM_REWARD), row, *patches.values())
    for error_type, text, output in zip(patches, patches.values(), outputs, strict=True):
        assert output.reward_score == 0.0
        assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 0.0,
                                                            "error_type": error_type}
        assert output.response_mask == [1] * response_tokens(text)


@pytest.mark.docker
@pytest.mark.parametrize("failure", ["engine_unreachable", "image_missing"])
@pytest.mark.parametrize("use_v1", [True, False])
def test_no_verdict_is_dropped_under_v1_and_masked_under_legacy(failure, use_v1, dataset_row, coin_change_image,
                                                                  monkeypatch, caplog):
    if failure == "engine_unreachable":
        # A fresh client that finds no engine; scored with the loop's own mode (no custom reward function).
        monkeypatch.setenv("DOCKER_HOST", DEAD_ENGINE)
        config, error_type = loop_config(use_v1=use_v1), "daemon_unavailable"
    else:
        # verl's custom reward function (deepgym's, through pkg://) raises; the loop handles it.
        monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
        config, error_type = loop_config(use_v1=use_v1, **DEEPGYM_REWARD), "image_missing"
    before = kept_out_count()
    if use_v1:
        with pytest.raises(NoVerdictError) as info:
            run_loop(config, dataset_row, RIGHT)
        assert info.value.error_type == error_type and "v1" in str(info.value)
    else:
        with caplog.at_level(logging.WARNING, logger="deepgym.verl"):
            [output] = run_loop(config, dataset_row, RIGHT)
        assert output.response_mask == [0] * response_tokens(RIGHT)
        assert output.reward_score == 0.0
        assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 1.0,
                                                            "error_type": error_type}
        assert any(error_type in record.getMessage() for record in caplog.records)
    assert kept_out_count() == before + 1
    if failure == "engine_unreachable":
        # docker-py leaves the socket that failed to connect to the dead engine for the garbage collector;
        # collect it here, where its ResourceWarning is expected, rather than in whichever test runs next.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


def test_a_loop_mode_deepgym_cannot_run_fails_when_verl_builds_the_loop():
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    entry = OmegaConf.create({"name": "copied", "_target_": "deepgym.integrations.verl_mask.DeepGymSingleTurnAgentLoop",
                              "mode": "kubernetes"})
    config = loop_config(use_v1=True)

    async def build():
        return hydra.utils.instantiate(config=entry, trainer_config=DictConfigWrap(config=config),
                                       server_manager=None, tokenizer=LineTokenizer(), processor=None,
                                       hf_model_type=None, dataset_cls=RLHFDataset,
                                       data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))

    with pytest.raises(Exception, match="unknown mode.*Available modes: auto, docker, local, daytona, e2b, modal, apple"):
        asyncio.run(build())


@pytest.mark.docker
def test_warns_when_more_than_5_of_100_samples_are_kept_out(dataset_row, coin_change_image, monkeypatch, caplog):
    # Cheap samples: prose has no code block (judged 0 without a container); code meets a missing image (no
    # verdict, found in milliseconds). Legacy trainer, so a kept-out sample is masked rather than raised.
    monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
    prose = "Use dynamic programming."
    config = loop_config(use_v1=False, **DEEPGYM_REWARD)
    kept_out.reset()

    def block_warnings() -> int:
        return sum(BLOCK_WARNING in record.getMessage() for record in caplog.records)

    with caplog.at_level(logging.WARNING, logger="deepgym"):
        # Block 1: five kept out among the first 99 samples is within the limit...
        responses = [RIGHT if i % 20 == 0 else prose for i in range(99)]
        outputs = run_loop(config, dataset_row, *responses)
        assert sum(o.extra_fields["reward_extra_info"]["error"] for o in outputs) == 5
        assert block_warnings() == 0 and kept_out.snapshot()["warnings"] == 0
        # ...and a sixth, the block's 100th sample, is over it: one warning, naming the cause.
        run_loop(config, dataset_row, RIGHT)
        assert block_warnings() == 1
        assert "image_missing x6" in next(r.getMessage() for r in caplog.records if BLOCK_WARNING in r.getMessage())
        # Block 2 counts afresh: five kept out do not warn, the sixth does, at once.
        run_loop(config, dataset_row, *[RIGHT] * 5)
        assert block_warnings() == 1
        run_loop(config, dataset_row, RIGHT)
        assert block_warnings() == 2
    assert kept_out.snapshot() == {"samples": 106, "no_verdict": 12, "warnings": 2, "block_samples": 6,
                                   "block_no_verdict": 6, "by_error_type": {"image_missing": 12},
                                   "canary_failures": 0, "unhealthy_images": {}}
    assert kept_out_count() == 12


@pytest.mark.docker
def test_legacy_batch_through_verls_worker_postprocessing(dataset_row, coin_change_image, monkeypatch):
    """A right, a wrong and a masked sample go through verl's own AgentLoopWorker postprocessing (legacy path):
    one reward-extra-info key set for all, the masked sample's mask stays zero, and rm_scores are ours."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    config = loop_config(use_v1=False, **DEEPGYM_REWARD)
    right, wrong = run_loop(config, dataset_row, RIGHT, WRONG)
    monkeypatch.setenv("DEEPGYM_TAG", "missing-for-verl-test")
    [masked] = run_loop(config, dataset_row, RIGHT)

    worker = object.__new__(AgentLoopWorker)  # the worker's postprocessing, without its Ray actor and model
    worker.config, worker.rollout_config = config, config.actor_rollout_ref.rollout
    worker.tokenizer, worker.processor, worker.mm_processor_kwargs = LineTokenizer(), None, {}
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False

    async def postprocess():
        row = {k: v for k, v in dataset_row.items() if k != "dummy_tensor"}
        inputs = [await worker._agent_loop_postprocess(o, False, **row) for o in (right, wrong, masked)]
        return worker._postprocess(inputs)

    batch = asyncio.run(postprocess())
    assert batch.meta_info["reward_extra_keys"] == list(REWARD_KEYS)
    assert batch.non_tensor_batch["error"].tolist() == [0.0, 0.0, 1.0]
    assert batch.non_tensor_batch["error_type"].tolist() == ["", "wrong_answer", "image_missing"]
    assert batch.batch["rm_scores"].sum(dim=1).tolist() == [1.0, 0.0, 0.0]
    trained_tokens = batch.batch["response_mask"].sum(dim=1).tolist()
    assert trained_tokens == [response_tokens(RIGHT), response_tokens(WRONG), 0]
    assert int(batch.batch["responses"][2].count_nonzero()) == response_tokens(RIGHT)  # its tokens are kept
