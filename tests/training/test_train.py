"""Real trainers on nkiagent's exports: TRL's SFTTrainer, GRPOTrainer (nkiagent's reward function and
environment adapter) and DPOTrainer, two steps each on a tiny randomly initialised model built here.

Nothing is downloaded: the tokenizer is a word-level one made from the rows themselves, the
chat template is the Qwen3 one TRL ships (so TRL's tool-call parsing applies), and the model is
a 1-layer Qwen3 with 16 hidden units. Needs the ``train`` extra (trl, transformers); the default
suite skips this file without it, CI installs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from datasets import Dataset

from nkiagent.training.env import reward_fn
from nkiagent.training.export import ExportOptions, export_sessions
from nkiagent.training.trl_env import TRLKernelEnv

SPECIAL = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def _words(value: Any) -> list[str]:
    return json.dumps(value).replace("\\n", " ").split()


def _tiny(texts: list[Any]) -> tuple[Any, Any]:
    """(tokenizer, model): a word-level tokenizer over ``texts`` with the Qwen3 chat template, and a random 1-layer Qwen3."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    vocab: dict[str, int] = {"[UNK]": 0, "[PAD]": 1}
    for text in texts:
        for w in _words(text):
            vocab.setdefault(w, len(vocab))
        if len(vocab) > 4000:
            break
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    fast.chat_template = qwen3_chat_template
    cfg = Qwen3Config(
        vocab_size=len(fast),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=4096,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
        tie_word_embeddings=True,
    )
    transformers.set_seed(0)
    return fast, Qwen3ForCausalLM(cfg)


def _args(cls: Any, out: Path, **kw: Any) -> Any:
    return cls(
        output_dir=str(out),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        dataloader_num_workers=0,
        **kw,
    )


def _losses(trainer: Any) -> list[float]:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_sft_trainer_runs_two_steps_on_the_trl_export(scripted: Path, tmp_path: Path) -> None:
    rows = export_sessions(scripted, "sft", "trl", ExportOptions(compact_system=True)).rows
    assert len(rows) == 2 and all("nki_docs" in r["prompt"][0]["content"] and len(r["prompt"][0]["content"]) < 3000 for r in rows)
    ds = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"], "tools": r["tools"]} for r in rows] * 2)
    tokenizer, model = _tiny([r["prompt"] + r["completion"] for r in rows])
    trainer = trl.SFTTrainer(
        model=model, args=_args(trl.SFTConfig, tmp_path, max_length=None), train_dataset=ds, processing_class=tokenizer
    )
    trainer.train()
    assert trainer.state.global_step == 2 and len(_losses(trainer)) == 2 and all(x > 0 for x in _losses(trainer))


def test_dpo_trainer_runs_two_steps_on_the_dpo_export(scripted: Path, tmp_path: Path) -> None:
    rows = export_sessions(scripted, "dpo", "trl", ExportOptions(compact_system=True)).rows
    assert rows
    ds = Dataset.from_list([{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]} for r in rows] * 4)
    tokenizer, model = _tiny([r["prompt"] + r["chosen"] + r["rejected"] for r in rows])
    import copy

    trainer = trl.DPOTrainer(
        model=model,
        ref_model=copy.deepcopy(model),
        args=_args(trl.DPOConfig, tmp_path, max_length=None),
        train_dataset=ds,
        processing_class=tokenizer,
    )
    trainer.train()
    assert trainer.state.global_step == 2 and len(_losses(trainer)) == 2


def test_grpo_trainer_runs_two_steps_with_the_reward_function_and_the_environment(scripted: Path, tmp_path: Path) -> None:
    calls: list[list[float]] = []

    def nkiagent_reward(prompts: Any, completions: Any, **kw: Any) -> list[float]:
        got = reward_fn(prompts, completions, **kw)
        calls.append(got)
        return got

    rows = export_sessions(scripted, "rl", "trl-grpo", ExportOptions(compact_system=True)).rows[:2]
    cols = ("prompt", "task", "target", "kernel", "kernel_path")
    ds = Dataset.from_list([{k: r[k] for k in cols} for r in rows] * 2)
    tokenizer, model = _tiny([r["prompt"] for r in rows])
    args = (
        _args(trl.GRPOConfig, tmp_path, num_generations=2, max_completion_length=8, generation_batch_size=2, max_prompt_length=None)
        if "max_prompt_length" in trl.GRPOConfig.__dataclass_fields__
        else _args(trl.GRPOConfig, tmp_path, num_generations=2, max_completion_length=8)
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[nkiagent_reward],
        args=args,
        train_dataset=ds,
        processing_class=tokenizer,
        environment_factory=TRLKernelEnv,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    # a random model writes no kernel: every completion is scored, as a compile failure, by the verifier-backed reward
    assert calls and all(r == -0.5 for batch in calls for r in batch)
    rewards = [h for h in trainer.state.log_history if "reward" in h]
    assert rewards and any("TRLKernelEnv" in k for k in rewards[0])  # the environment's own reward is a logged source


def test_the_environment_adapter_runs_the_real_tools(scripted: Path) -> None:
    row = export_sessions(scripted, "rl", "trl-grpo").rows[1]  # the edit turn: its kernel is the starting one
    env = TRLKernelEnv()
    assert env.reset(**row) is None
    assert "TILE_COLS = 128" in env.read_file(row["kernel_path"])
    assert "error:" in env.edit_file(row["kernel_path"], "NOT THERE", "x")
    out = env.edit_file(row["kernel_path"], "TILE_COLS = 128", "TILE_COLS = 512")
    assert "verdict: pass" in out and env.get_reward() > 1.0
    assert "error:" in env.write_file("/etc/passwd", "x")  # outside the workspace: an error message, not an exception
