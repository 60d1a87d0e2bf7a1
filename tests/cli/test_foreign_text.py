"""Nothing mpsd did not write reaches a terminal raw, and every value from another process or a
file is checked where it enters (issue 28): hostile command lines in `mpsd jobs`, job ids that
are not ASCII digits, damaged rows, a job's ratio that is no finite number, argv that is not
UTF-8; the live view in a real pty at 20x5 and 200x50, resized, stopped and ended."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pexpect
import pytest

from mpsd import paths, term
from mpsd.daemon.history import Store
from mpsd.daemon.jobs import Job, describe
from mpsd.machine.mljobs import MLProcess
from tests.conftest import ROOT, run_mpsd, wait_for
from tests.fixture_files import hostile_command_lines

pytestmark = pytest.mark.usefixtures("isolated_dirs")
# What a terminal acts on: any C0 control but the newline, DEL, C1, the bidi overrides.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = [case["command"] for case in hostile_command_lines()]


def _store(*jobs: dict[str, object]) -> None:
    with Store.open(paths.history_file()) as store:
        for job in jobs:
            store.save_job(job)


def test_hostile_command_lines_reach_the_terminal_escaped_and_json_exact() -> None:
    _store(*(asdict(Job(pid=i + 1, command=c, started=10.0 + i)) for i, c in enumerate(HOSTILE)))
    shown = run_mpsd("jobs")
    assert shown.returncode == 0 and not RAW.search(shown.stdout), repr(shown.stdout)
    assert "\\e]52;c;" in shown.stdout  # made visible, not dropped
    for job_id in range(1, len(HOSTILE) + 1):
        report = run_mpsd("jobs", "show", str(job_id)).stdout
        assert report and not RAW.search(report), repr(report)
    exact = json.loads(run_mpsd("jobs", "--json").stdout)
    assert sorted(item["command"] for item in exact) == sorted(HOSTILE)


def test_visible_shows_each_control_and_keeps_the_rest() -> None:
    for command in HOSTILE:
        assert not RAW.search(term.visible(command)) and "\n" not in term.visible(command)
    assert term.visible("naïve 漢字 /path") == "naïve 漢字 /path"
    assert term.visible("a\x1b[2Jb\tc") == "a\\e[2Jb\\tc"


@pytest.mark.parametrize("job_id", ["²", "٣", "3\u200b", "1" * 40, "-1"])
def test_a_job_id_that_is_not_plain_ascii_digits_is_one_sentence(job_id: str) -> None:
    _store(asdict(Job(pid=3, command="python a.py", started=10.0)))
    done = run_mpsd("jobs", "show", job_id)
    assert done.returncode == 2, done.stdout
    assert "is not a job id" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "unexpected error" not in done.stderr and "job 3" not in done.stdout


@pytest.mark.parametrize("bad", [{"peak": "lots"}, {"started": float("inf")}, {"peak": -5}])
def test_a_damaged_row_is_said_for_itself_and_the_others_are_listed(
    bad: dict[str, object],
) -> None:
    _store(
        asdict(Job(pid=1, command="python good.py", started=10.0, ended=20.0)),
        {**asdict(Job(pid=2, command="python bad.py", started=30.0)), **bad},
    )
    done = run_mpsd("jobs")
    assert done.returncode == 0 and "python good.py" in done.stdout, done.stderr
    assert "job 2's record is damaged" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def child() -> subprocess.Popen[bytes]:
    started = []

    def start(argv: list[bytes | str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env={**os.environ, **env})
        started.append(proc)
        wait_for(lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes(), "the child to start")
        return proc

    yield start  # type: ignore[misc]
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "-1", "2.5", "0x"])
def test_a_job_whose_ratio_is_no_finite_number_in_range_has_a_cap_not_known(
    value: str, child: object
) -> None:
    from mpsd.limits import Limits

    proc = child(["sleep", "30"], {"PYTORCH_MPS_HIGH_WATERMARK_RATIO": value})  # type: ignore[operator]
    limits = Limits(0.5, 0.5, 1 << 30, 1 << 31, "torch", 1 << 31, 0.8, None)  # type: ignore[arg-type]
    found = describe(MLProcess(proc.pid, "sleep", "torch", 1), limits, (), 1 << 34)
    assert (found["cap_from"], found["ratio"], found["cap_known"]) == (
        "its environment",
        None,
        False,
    )
    assert "cap" not in found
    _store(asdict(Job(pid=proc.pid, started=1.0, **{k: v for k, v in found.items()})))


def test_a_command_line_that_is_not_utf8_is_stored(child: object) -> None:
    proc = child([b"sh", b"-c", b"sleep 30", b"\xff\xfe-not-utf8"], {})  # type: ignore[operator]
    found = describe(MLProcess(proc.pid, "sh", "torch", 1), None, (), 1 << 34)
    assert "\ufffd" in found["command"]
    _store(asdict(Job(pid=proc.pid, started=1.0, command=found["command"])))
    assert "-not-utf8" in run_mpsd("jobs").stdout


# -- the live view in a real pty ---------------------------------------------------------------


def _live(rows: int, cols: int, env: dict[str, str] | None = None) -> pexpect.spawn:
    view = pexpect.spawn(
        sys.executable,
        ["-m", "mpsd", "status", "--watch", "--every", "0.3s"],
        cwd=str(ROOT),
        env={**os.environ, "TERM": "xterm", **(env or {})},
        encoding="utf-8",
        dimensions=(rows, cols),
        timeout=30,
    )
    view.logfile_read = io.StringIO()  # all it wrote
    return view


def _written(view: pexpect.spawn) -> str:
    return str(view.logfile_read.getvalue())


def _frames(text: str) -> list[list[str]]:
    """Each frame the view drew (after ESC[H), as its rows without mpsd's erase codes."""
    frames = []
    for frame in text.split("\x1b[H")[1:]:
        frame = frame.split("\x1b[J")[0]
        frames.append(re.findall(r"\x1b\[\d+;1H(.*?)\x1b\[K", frame))
    return frames


@pytest.mark.parametrize(("rows", "cols"), [(5, 20), (50, 200)])
def test_the_live_view_fits_the_window_and_redraws_in_place(rows: int, cols: int) -> None:
    view = _live(rows, cols)
    for _ in range(3):
        view.expect_exact("\x1b[J")
    view.send("q")
    view.expect(pexpect.EOF)
    frames = _frames(_written(view))
    assert len(frames) >= 3, "not drawn again in place"
    for frame in frames:
        assert len(frame) <= rows
        assert all(len(row) <= cols for row in frame), frame


def test_the_live_view_redraws_at_once_on_a_resize() -> None:
    view = _live(24, 80)
    view.expect_exact("\x1b[J")
    before = len(_frames(_written(view)))
    view.setwinsize(5, 20)
    view.expect_exact("\x1b[J")
    view.expect_exact("\x1b[J")
    view.send("q")
    view.expect(pexpect.EOF)
    after = _frames(_written(view))[before:]
    assert after and all(len(f) <= 5 and all(len(r) <= 20 for r in f) for f in after), after


def test_the_cursor_is_shown_again_when_the_view_gets_sigterm() -> None:
    view = _live(24, 80)
    view.expect_exact("\x1b[?25l")
    view.expect_exact("\x1b[J")
    view.kill(signal.SIGTERM)
    view.expect_exact("\x1b[?25h")
    view.expect(pexpect.EOF)
    assert "Traceback" not in _written(view)


def test_ctrl_z_shows_the_cursor_and_fg_hides_it_again() -> None:
    # In an interactive shell, as a job: the terminal stops only a job a shell controls.
    shell = pexpect.spawn(
        "bash",
        ["--norc", "--noprofile", "-i"],
        env={**os.environ, "TERM": "xterm", "PS1": "$ "},
        encoding="utf-8",
        dimensions=(24, 80),
        timeout=30,
    )
    shell.expect_exact("$ ")
    shell.sendline(f"{sys.executable} -m mpsd status --watch --every 0.3s")
    shell.expect_exact("\x1b[?25l")
    shell.expect_exact("\x1b[J")
    shell.sendcontrol("z")
    shell.expect_exact("\x1b[?25h")
    shell.expect("Stopped")
    shell.sendline("fg")
    shell.expect_exact("\x1b[?25l")  # hidden again once it goes on
    shell.expect_exact("\x1b[J")
    shell.send("q")
    shell.expect_exact("\x1b[?25h")
    shell.expect_exact("$ ")
    shell.sendline("exit")
    shell.expect(pexpect.EOF)


@pytest.mark.parametrize("where", ["pipe", "TERM=dumb"])
def test_the_live_view_writes_only_text_to_a_pipe_or_a_dumb_terminal(where: str) -> None:
    if where == "pipe":
        proc = subprocess.Popen(
            [sys.executable, "-m", "mpsd", "status", "--watch", "--every", "0.2s"],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        seen = [proc.stdout.readline().decode() for _ in range(12)]
        proc.terminate()
        out = "".join(seen) + proc.communicate(timeout=30)[0].decode()
    else:
        view = _live(24, 80, {"TERM": "dumb"})
        view.expect("free: |problem: ")
        view.expect("free: |problem: ")
        view.send("q")
        view.expect(pexpect.EOF)
        out = _written(view)
    assert "\x1b" not in out and ("free:" in out or "problem:" in out), repr(out)


@pytest.mark.parametrize("command", ["status", "doctor"])
def test_a_path_with_control_characters_in_it_is_shown_escaped(
    command: str, tmp_path: Path
) -> None:
    config = Path(os.path.realpath(tmp_path)) / "conf\x1b]0;pwned\x07"
    done = run_mpsd(command, env={"MPSD_CONFIG_DIR": str(config)})
    assert "\x1b]0;" not in done.stdout + done.stderr, done.stdout
    assert "\\e]0;pwned\\x07" in done.stdout + done.stderr


def test_explains_kill_name_file_name_and_projects_paths_are_shown_escaped(
    tmp_path: Path,
) -> None:
    kill = "Out of memory: Killed process 4242 (py\x9b2Jth\u202eon) total-vm:100kB, anon-rss:50kB\n"
    shown = run_mpsd("explain", input=kill)
    assert shown.returncode == 0 and not RAW.search(shown.stdout), repr(shown.stdout)
    assert "py\\x9b2jth\\u202eon [4242]" in shown.stdout
    named = tmp_path / "a\x1b[31mred"
    named.write_text("no error here\n")
    said = run_mpsd("explain", str(named))
    assert said.returncode != 0 and not RAW.search(said.stderr), repr(said.stderr)
    assert "a\\e[31mred" in said.stderr
    project = str(Path(os.path.realpath(tmp_path)) / "p\x1b]0;pwned\x07")
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text(f"projects = [{json.dumps(project)}]\n")
    listed = run_mpsd("projects")
    assert listed.returncode == 0 and not RAW.search(listed.stdout), repr(listed.stdout)
    assert "p\\e]0;pwned\\x07" in listed.stdout
    assert json.loads(run_mpsd("projects", "--json").stdout)["projects"][0]["path"] == project


def test_install_and_enable_show_the_users_own_text_escaped(tmp_path: Path) -> None:
    """A prompt line of the user's rc file in install's dry-run diff, and a `--python` path in
    enable's answer, are the user's text: shown, never acted on by the terminal."""
    home = Path(os.environ["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / ".bashrc").write_text('export PS1="\x1b]0;title\x07$ "\n')
    shown = run_mpsd("install", "--dry-run", "--shell", "bash")
    assert shown.returncode == 0, shown.stderr
    assert not RAW.search(shown.stdout) and 'PS1="\\e]0;title\\x07$ "' in shown.stdout
    project = tmp_path / "proj"
    project.mkdir()
    odd = tmp_path / "py\x1b[2Jthon"
    odd.symlink_to(sys.executable)
    said = run_mpsd("enable", str(project), "--python", str(odd))
    assert not RAW.search(said.stdout + said.stderr), repr(said.stdout + said.stderr)
    assert "py\\e[2Jthon" in said.stdout + said.stderr
