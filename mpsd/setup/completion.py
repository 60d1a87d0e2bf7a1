"""Tab completion for zsh, bash and fish, generated from mpsd's own argparse parser, so that a new
command or option is completed the day it exists (``mpsd completion SHELL`` prints it; ``mpsd
install`` puts it where each shell finds it).

The parser is read once into plain records (``Command``, ``Arg``); each shell's text is made from
them. What a value completes to is read from the parser too: its ``choices``; a metavar that
lists words (``zsh,bash,fish``); ``DIR`` (directories); ``PATH``/``FILE`` (files); a command line
(``mpsd run -- CMD``). The scripts run no Python when the user presses TAB.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SHELLS = ("zsh", "bash", "fish")


@dataclass(frozen=True)
class Arg:
    """An option (``names`` start with ``-``) or a positional; ``kind`` says what its value
    completes to: ``none`` (a flag), ``words``, ``dirs``, ``files``, ``command`` or ``any``."""

    names: tuple[str, ...]
    help: str
    kind: str
    words: tuple[str, ...] = ()
    repeat: bool = False
    optional: bool = True

    @property
    def is_option(self) -> bool:
        return self.names[0].startswith("-")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    args: tuple[Arg, ...] = field(default_factory=tuple)

    @property
    def options(self) -> list[Arg]:
        return [arg for arg in self.args if arg.is_option]

    @property
    def positionals(self) -> list[Arg]:
        return [arg for arg in self.args if not arg.is_option]


def _kind(action: argparse.Action) -> tuple[str, tuple[str, ...]]:
    if action.nargs == 0:
        return "none", ()
    if action.choices:
        return "words", tuple(str(choice) for choice in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if action.nargs == argparse.REMAINDER:
        return "command", ()
    if "," in metavar:
        return "words", tuple(word for word in metavar.split(",") if word)
    if metavar == "DIR":
        return "dirs", ()
    if metavar in ("PATH", "FILE"):
        return "files", ()
    return "any", ()


def _arg(action: argparse.Action) -> Arg:
    kind, words = _kind(action)
    names = tuple(action.option_strings) or (action.dest,)
    return Arg(
        names=names,
        help=" ".join((action.help or "").split()),
        kind=kind,
        words=words,
        repeat=isinstance(action, argparse._AppendAction),
        optional=bool(action.option_strings) or action.nargs in ("?", "*", argparse.REMAINDER),
    )


def commands(parser: argparse.ArgumentParser) -> tuple[list[Arg], list[Command]]:
    """The top-level options and every command, read from the full parser
    (``mpsd.commands.full_parser()``, which the commands hand down)."""
    top = [_arg(a) for a in parser._actions if a.option_strings]
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                args = tuple(_arg(a) for a in sub._actions)
                found.append(Command(name, " ".join(helps.get(name, "").split()), args))
    return top, found


def render(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` (one of ``SHELLS``) from mpsd's full parser."""
    top, found = commands(parser)
    return {"zsh": _zsh, "bash": _bash, "fish": _fish}[shell](top, found)


# -- bash --------------------------------------------------------------------------------------


def _bash_words(words: list[str] | tuple[str, ...]) -> str:
    return "'" + " ".join(words).replace("'", "'\\''") + "'"


def _bash_value(arg: Arg) -> str:
    if arg.kind == "words":
        return f'COMPREPLY=($(compgen -W {_bash_words(arg.words)} -- "$cur"))'
    if arg.kind == "dirs":
        return 'COMPREPLY=($(compgen -d -- "$cur"))'
    if arg.kind == "command":
        return 'COMPREPLY=($(compgen -c -- "$cur"))'
    return "COMPREPLY=()"  # files or anything: bash's default (-o default) completes files


def _bash(top: list[Arg], found: list[Command]) -> str:
    names = [c.name for c in found] + [n for arg in top for n in arg.names if n.startswith("--")]
    lines = [
        "# mpsd tab completion for bash, generated from mpsd's parser (`mpsd completion bash`).",
        "_mpsd_complete() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        "            -*) ;;",
        '            *) cmd="${COMP_WORDS[i]}"; break ;;',
        "        esac",
        "    done",
        "    COMPREPLY=()",
        '    case "$cmd" in',
        f"        '') COMPREPLY=($(compgen -W {_bash_words(names)} -- \"$cur\")) ;;",
    ]
    for command in found:
        lines.append(f"        {command.name})")
        valued = [arg for arg in command.options if arg.kind != "none"]
        if valued:
            lines.append('            case "$prev" in')
            for arg in valued:
                lines.append(
                    f"                {'|'.join(arg.names)}) {_bash_value(arg)}; return 0 ;;"
                )
            lines.append("            esac")
        options = [n for arg in command.options for n in arg.names]
        lines.append('            if [[ "$cur" == -* ]]; then')
        lines.append(f'                COMPREPLY=($(compgen -W {_bash_words(options)} -- "$cur"))')
        positionals = command.positionals
        if positionals:
            lines.append("            else")
            lines.append(f"                {_bash_value(positionals[0])}")
        lines.append("            fi")
        lines.append("            ;;")
    lines += [
        "    esac",
        "    return 0",
        "}",
        "complete -o bashdefault -o default -F _mpsd_complete mpsd",
    ]
    return "\n".join(lines) + "\n"


# -- zsh ---------------------------------------------------------------------------------------


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_help(text: str) -> str:
    for char in "\\[]:":
        text = text.replace(char, "\\" + char)
    return text


def _zsh_action(arg: Arg) -> str:
    if arg.kind == "words":
        return "(" + " ".join(arg.words) + ")"
    return {"dirs": "_directories", "files": "_files", "command": "_normal"}.get(arg.kind, "")


def _zsh_spec(arg: Arg) -> list[str]:
    if arg.is_option:
        help_text = _zsh_help(arg.help)
        value = ""
        if arg.kind != "none":
            label = arg.names[-1].lstrip("-").upper()
            value = f":{label}:{_zsh_action(arg)}"
        exclusive = "(- *)" if arg.names[-1] in ("--help", "--version") else ""
        star = "*" if arg.repeat else ""
        if len(arg.names) > 1 and not exclusive:
            exclusive = "(" + " ".join(arg.names) + ")"
        return [_zsh_quote(f"{exclusive}{star}{name}[{help_text}]{value}") for name in arg.names]
    label = _zsh_help(arg.names[0])
    if arg.kind == "command":
        return [_zsh_quote(f"*::{label}:{_zsh_action(arg)}")]
    colons = "::" if arg.optional else ":"
    return [_zsh_quote(f"1{colons}{label}:{_zsh_action(arg)}")]


def _zsh(top: list[Arg], found: list[Command]) -> str:
    lines = [
        "#compdef mpsd",
        "# mpsd tab completion for zsh, generated from mpsd's parser (`mpsd completion zsh`).",
        "_mpsd() {",
        "    local context state state_descr line",
        "    typeset -A opt_args",
        "    local -a _mpsd_commands",
        "    _mpsd_commands=(",
    ]
    for command in found:
        entry = command.name + ":" + command.help.replace(":", "\\:")
        lines.append(f"        {_zsh_quote(entry)}")
    lines.append("    )")
    top_specs = [spec for arg in top for spec in _zsh_spec(arg)]
    lines.append("    _arguments -C " + " ".join(top_specs) + " '1: :->command' '*:: :->argument'")
    lines += [
        "    case $state in",
        "        command) _describe -t commands 'mpsd command' _mpsd_commands ;;",
        "        argument)",
        '            curcontext="${curcontext%:*:*}:mpsd-$words[1]:"',
        "            case $words[1] in",
    ]
    for command in found:
        specs = [spec for arg in command.args for spec in _zsh_spec(arg)]
        lines.append(f"                {command.name}) _arguments {' '.join(specs)} ;;")
    lines += [
        "            esac",
        "            ;;",
        "    esac",
        "}",
        # Autoloaded from fpath (compinit), the file's text is _mpsd's body: define, then run.
        # Sourced (`source <(mpsd completion zsh)`), it registers itself.
        'if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then',
        '    _mpsd "$@"',
        "elif (( ${+functions[compdef]} )); then",
        "    compdef _mpsd mpsd",
        "fi",
    ]
    return "\n".join(lines) + "\n"


# -- fish --------------------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_value(arg: Arg) -> str:
    if arg.kind == "words":
        return "-x -a " + _fish_quote(" ".join(arg.words))
    if arg.kind == "dirs":
        return "-x -a '(__fish_complete_directories)'"
    if arg.kind == "files":
        return "-r -F"
    if arg.kind == "command":
        return "-x -a '(__fish_complete_subcommand)'"
    return "-x"


def _fish_option(condition: str, arg: Arg) -> str:
    flags = []
    for name in arg.names:
        flags.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
    value = "" if arg.kind == "none" else " " + _fish_value(arg)
    help_text = f" -d {_fish_quote(arg.help)}" if arg.help else ""
    return f"complete -c mpsd -n {condition} {' '.join(flags)}{value}{help_text}"


def _fish(top: list[Arg], found: list[Command]) -> str:
    lines = [
        "# mpsd tab completion for fish, generated from mpsd's parser (`mpsd completion fish`).",
        "complete -c mpsd -e",
        "complete -c mpsd -f",
    ]
    first = "__fish_use_subcommand"
    for arg in top:
        lines.append(_fish_option(first, arg))
    for command in found:
        lines.append(
            f"complete -c mpsd -n {first} -a {command.name} -d {_fish_quote(command.help)}"
        )
    for command in found:
        condition = _fish_quote(f"__fish_seen_subcommand_from {command.name}")
        for arg in command.options:
            lines.append(_fish_option(condition, arg))
        for arg in command.positionals:
            if arg.kind == "files":
                lines.append(f"complete -c mpsd -n {condition} -F")
            elif arg.kind in ("words", "dirs", "command"):
                lines.append(f"complete -c mpsd -n {condition} {_fish_value(arg)}")
    return "\n".join(lines) + "\n"
