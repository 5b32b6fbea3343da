"""``nkiagent doctor``: what Neuron software this machine has, and which backend each command will use."""

from __future__ import annotations

import argparse
import json

__all__ = ["run_doctor"]

_DESCRIBE = {
    "emulator": "the embedded NKI emulator; latencies are cost-model estimates (emulator-estimate)",
    "neuron-sim": "AWS's NKI simulator for correctness; latencies are the emulator's estimates (emulator-estimate)",
    "neuron-hw": "AWS's compiler and a Trainium NeuronCore; latencies measured with the profiler (neuron-profile)",
}


def run_doctor(args: argparse.Namespace) -> int:
    from ..backends import detect, select_backend

    tc = detect(refresh=True)
    auto = select_backend("auto", tc)
    if args.json:
        print(json.dumps({"toolchain": tc.to_dict(), "backends": {"eval": auto, "run": auto, "crosscheck": auto,
                                                                  "simulate": "emulator", "profile": "emulator"}}, indent=2))
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
