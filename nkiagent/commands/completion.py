"""``nkiagent --completion bash|zsh``: a completion script made from the argument parser itself, so it never goes stale."""

from __future__ import annotations

import argparse

__all__ = ["completion_script"]


def _words(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, list[str]]]:
    """(top-level words, {subcommand: its options and choices}) of ``parser``."""
    top = [opt for a in parser._actions for opt in a.option_strings]
    subs: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words = [opt for a in sub._actions for opt in a.option_strings]
                words += [str(c) for a in sub._actions if not a.option_strings and a.choices for c in a.choices]
                subs[name] = sorted(set(words))
            top += list(action.choices)
    return sorted(set(top)), subs


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """A bash completion function for ``nkiagent`` (zsh loads it through ``bashcompinit``)."""
    top, subs = _words(parser)
    cases = "\n".join(f'        {name}) words="{" ".join(w)}" ;;' for name, w in sorted(subs.items()))
    script = f"""# nkiagent completion: eval "$(nkiagent --completion {shell})" (or save it to your shell's completion directory)
_nkiagent() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" words
    case "${{COMP_WORDS[1]}}" in
{cases}
        *) words="{" ".join(top)}" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    [[ ${{#COMPREPLY[@]}} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -F _nkiagent nkiagent"""
    if shell == "zsh":
        script = "autoload -U +X bashcompinit && bashcompinit\n" + script
    return script
