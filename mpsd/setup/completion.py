"""Tab completion for zsh, bash and fish, generated from mpsd's own argparse parser, so that a new
command or option is completed the day it exists. The parser is read into one table for every
shell (``table``), with a small lookup function around it: no Python runs on TAB."""

from __future__ import annotations

import argparse

SHELLS = ("zsh", "bash", "fish")
ESC = "\\:"  # a colon in a zsh description


def _value(action: argparse.Action) -> str:
    if action.nargs == argparse.REMAINDER:
        return "@command"
    if action.choices:
        return " ".join(str(choice) for choice in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if "," in metavar:
        return " ".join(word for word in metavar.split(",") if word)
    return "@dirs" if metavar == "DIR" else ""


def table(parser: argparse.ArgumentParser) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(case, words)`` rows in match order, ``case`` being ``"COMMAND PREVIOUS-WORD"`` (``*``:
    any; ``"COMMAND -"``: the typed word starts with ``-``), and ``(name, help)`` per command.
    ``words``: options, choices, a metavar's words (``zsh,bash,fish``), ``@dirs`` (``DIR``),
    ``@command`` (``mpsd run -- CMD``), ``@commands``, or nothing: files."""
    top = [name for action in parser._actions for name in action.option_strings]
    rows = [(" -", " ".join(top)), (" *", "@commands")]
    helps = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        described = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            helps.append((name, " ".join(described.get(name, "").split())))
            options = [option for arg in sub._actions for option in arg.option_strings]
            found = [(f"{name} -", " ".join(options))]
            for arg in sub._actions:
                value = "" if arg.nargs == 0 else _value(arg)
                cases = [f"{name} {option}" for option in arg.option_strings] or [f"{name} *"]
                found += [(case, value) for case in cases if value]
            rows += sorted(found, key=lambda row: row[0].endswith("*"))  # the positional last
    return rows, helps


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _case(case: str) -> str:
    return _quote(case[:-1]) + "*" if case.endswith(" *") else _quote(case)


_BASH = """\
# mpsd tab completion for bash, generated from mpsd's parser (`mpsd completion bash`).
_mpsd_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}" key cmd="" i words_=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        [[ "${COMP_WORDS[i]}" != -* ]] && { cmd="${COMP_WORDS[i]}"; break; }
    done
    key="$cmd ${COMP_WORDS[COMP_CWORD-1]}"
    [[ "$cur" == -* ]] && key="$cmd -"
    case "$key" in
%s
    esac
    case "$words_" in
        @commands) COMPREPLY=($(compgen -W %s -- "$cur")) ;;
        @dirs) COMPREPLY=($(compgen -d -- "$cur")) ;;
        @command) COMPREPLY=($(compgen -c -- "$cur")) ;;
        '') COMPREPLY=() ;;  # files: bash's default (-o default) completes them
        *) COMPREPLY=($(compgen -W "$words_" -- "$cur")) ;;
    esac
    return 0
}
complete -o bashdefault -o default -F _mpsd_complete mpsd
"""

_ZSH = """\
#compdef mpsd
# mpsd tab completion for zsh, generated from mpsd's parser (`mpsd completion zsh`).
_mpsd() {
    local key cmd="" words_=""
    local -i i
    local -a _mpsd_commands=(
%s
    )
    for ((i = 2; i < CURRENT; i++)); do
        [[ "$words[i]" != -* ]] && { cmd="$words[i]"; break }
    done
    key="$cmd $words[CURRENT-1]"
    [[ "$words[CURRENT]" == -* ]] && key="$cmd -"
    case "$key" in
%s
    esac
    case "$words_" in
        @commands) _describe -t commands 'mpsd command' _mpsd_commands ;;
        @dirs) _directories ;;
        '') _files ;;
        @command)
            shift $i words; (( CURRENT -= i ))
            [[ "$words[1]" == -- ]] && { shift words; (( CURRENT-- )) }
            _normal ;;
        *) compadd -- ${=words_} ;;
    esac
}
# Autoloaded from fpath (compinit), the file's text is _mpsd's body: define, then run.
# Sourced (`source <(mpsd completion zsh)`), it registers itself.
if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then
    _mpsd "$@"
elif (( ${+functions[compdef]} )); then
    compdef _mpsd mpsd
fi
"""

_FISH = """\
# mpsd tab completion for fish, generated from mpsd's parser (`mpsd completion fish`).
function __mpsd_complete
    set -l line (commandline -opc)
    set -l cur (commandline -ct)
    set -l cmd ""
    for word in $line[2..-1]
        if not string match -q -- '-*' $word
            set cmd $word
            break
        end
    end
    set -l key "$cmd $line[-1]"
    string match -q -- '-*' $cur; and set key "$cmd -"
    set -l words
    switch $key
%s
    end
    switch "$words"
        case @commands
        case ''
            __fish_complete_path $cur
        case @dirs
            __fish_complete_directories $cur
        case @command
            __fish_complete_subcommand --fcs-skip=2
        case '*'
            string split ' ' -- $words
    end
end
complete -c mpsd -e
complete -c mpsd -f -a '(__mpsd_complete)'
%s
"""


def render(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` (one of ``SHELLS``) from mpsd's full parser."""
    rows, helps = table(parser)
    # bash and zsh share the case lines (``words_``: zsh's ``words`` is its command line).
    cases = "\n".join(f"        {_case(case)}) words_={_quote(words)} ;;" for case, words in rows)
    if shell == "bash":
        return _BASH % (cases, _quote(" ".join(name for name, _ in helps)))
    if shell == "zsh":
        names = [f"        {_quote(name + ':' + text.replace(':', ESC))}" for name, text in helps]
        return _ZSH % ("\n".join(names), cases)
    fish_cases = [
        f"        case {_fish_quote(case)}\n            set words {_fish_quote(words)}"
        for case, words in rows
    ]
    names = [
        f"complete -c mpsd -n __fish_use_subcommand -a {name} -d {_fish_quote(text)}"
        for name, text in helps
    ]
    return _FISH % ("\n".join(fish_cases), "\n".join(names))
