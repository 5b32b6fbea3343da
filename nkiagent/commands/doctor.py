"""``nkiagent doctor``: what Neuron software this machine has, and which backend each command will use."""

from __future__ import annotations

import argparse
import json
import sys
import time

__all__ = ["run_doctor"]

_DESCRIBE = {
    "emulator": "the embedded NKI emulator; latencies are cost-model estimates (emulator-estimate)",
    "neuron-sim": "AWS's NKI simulator for correctness; latencies are the emulator's estimates (emulator-estimate)",
    "neuron-hw": "AWS's compiler and a Trainium NeuronCore; latencies measured with the profiler (neuron-profile)",
}


def run_doctor(args: argparse.Namespace) -> int:
    if getattr(args, "model", None):
        return check_model_command(args)
    from ..backends import detect, select_backend

    tc = detect(refresh=True)
    auto = select_backend("auto", tc)
    if args.json:
        print(
            json.dumps(
                {
                    "toolchain": tc.to_dict(),
                    "backends": {"eval": auto, "run": auto, "crosscheck": auto, "simulate": "emulator", "profile": "emulator"},
                },
                indent=2,
            )
        )
        return 0

    def row(label: str, value: str) -> None:
        print(f"  {label:28s} {value or 'not found'}")

    print("Neuron software on this machine")
    row("nki (AWS, >= 0.3)", f"{tc.nki_version}  ({tc.nki_path})" if tc.nki_version else "")
    row("neuronxcc.nki (NKI 0.1 API)", f"{tc.neuronxcc_version}  ({tc.neuronxcc_path})" if tc.neuronxcc_version else "")
    row("neuronx-cc compiler", f"{tc.neuronx_cc_version}  ({tc.neuronx_cc})" if tc.neuronx_cc else "")
    cores = f" ({tc.neuron_cores} NeuronCores per neuron-ls)" if tc.neuron_cores else ""
    row("Neuron devices", ", ".join(tc.devices) + cores if tc.devices else "")
    row("neuron-ls", tc.neuron_ls)
    row("neuron-profile", tc.neuron_profile)
    row("neuron-explorer", tc.neuron_explorer)
    for note in tc.notes:
        print(f"  note: {note}")
    print()
    print("Backends")
    print(f"  eval / run / crosscheck (--backend auto) -> {auto}: {_DESCRIBE[auto]}")
    print(f"  simulate / profile                       -> emulator: {_DESCRIBE['emulator']}")
    if auto == "emulator":
        print()
        print("No Neuron software found: every command runs on the embedded emulator (that is the default and needs nothing else).")
        print("On Trainium, install AWS's Neuron SDK (nki, neuronx-cc, aws-neuronx-tools) and run `nkiagent doctor` again.")
    return 0


#: the one tool of the check request: whether the server accepts ``tools`` is what a session needs to know
_PING_TOOL = {
    "type": "function",
    "function": {"name": "ok", "description": "call this to answer", "parameters": {"type": "object", "properties": {}}},
}


def check_model_command(args: argparse.Namespace) -> int:
    """``nkiagent doctor --model M``: one tiny request with the configured endpoint, key, timeout; what works, or the error and its fix."""
    from dataclasses import replace
    from pathlib import Path

    from ..agent.models import ModelError
    from ..agent.runner import build_model, check_model
    from ..config import ConfigError, load_settings

    try:
        settings = load_settings(
            Path(args.workspace).resolve(), {"model": args.model, "api_base": args.api_base, "api_key_env": args.api_key_env}
        ).settings
    except ConfigError as exc:
        print(f"nkiagent doctor: {exc}", file=sys.stderr)
        return 2
    model = build_model(replace(settings, retries=0, max_tokens=16, temperature=None))
    where = f" at {settings.api_base}" if settings.api_base else ""
    t0 = time.monotonic()
    try:
        check_model(model)
        turn = model.complete([{"role": "user", "content": "Reply with the single word: ok"}], [_PING_TOOL])
    except ModelError as exc:
        print(f"model {settings.model}: FAILED: {exc}")
        return 1
    tools = "no (the server refused them: sessions use the text fallback)" if getattr(model, "text_mode", False) else "yes"
    print(
        f"model {settings.model}{where}: answered in {time.monotonic() - t0:.2f} s (served as {turn.model or settings.model}); "
        f"tool calls: {tools}; timeout {settings.timeout_s:g} s, retries {settings.retries}"
    )
    return 0
