"""The registered commands: name -> (module under mpsd.commands, one-line help).

Only commands that really work are listed. Each module defines
``configure(parser)`` (its arguments) and ``run(args) -> int`` (its exit code),
and imports anything heavy inside ``run`` so that ``mpsd --help`` and every other
command start fast.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "explain": ("explain", "explain a pasted PyTorch out-of-memory message and how to fix it"),
    "install": ("install", "set mpsd up for this user: config, shell hooks, the launchd agent"),
    "uninstall": ("install", "undo mpsd install (--purge: also config and history)"),
    "doctor": ("doctor", "check the whole chain and say what is wrong and how to fix it"),
    "enable": ("enable", "opt a directory (and everything below it) in"),
    "disable": ("disable", "take an opted-in directory out"),
    "projects": ("projects", "list the opted-in directories"),
    "env": ("env", "print the watermark exports that apply in a directory"),
    "run": ("run", "run a command with the watermark variables applied"),
    "hook": ("hook", 'print the shell hook code (eval "$(mpsd hook zsh)")'),
    "completion": ("completion", "print tab completion for zsh, bash or fish"),
    "daemon": ("daemon", "run the daemon in the foreground (--once: one update, then exit)"),
    "status": ("status", "is the daemon alive, the limits in force, free memory over the window"),
    "probe": (
        "probe",
        "fill MPS with random tensors under the limit: does PyTorch stop cleanly before swap?",
    ),
}
