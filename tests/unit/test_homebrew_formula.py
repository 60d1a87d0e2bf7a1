"""packaging/homebrew/mpsd.rb: valid Ruby (`ruby -c`), the Homebrew conventions it must follow,
one test per `brew audit --strict` rule it is known to meet, its service block in step with
mpsd's own launchd agent, and its url and resources exactly what packaging/homebrew/resources.py
writes from pyproject.toml, a recorded `pip install --dry-run --report` and a recorded PyPI JSON
(no network)."""

from __future__ import annotations

import copy
import importlib.util
import json
import plistlib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

FORMULA = ROOT / "packaging" / "homebrew" / "mpsd.rb"
REPORT = ROOT / "tests" / "fixtures" / "homebrew" / "pip-report.json"
PYPI_JSON = ROOT / "tests" / "fixtures" / "homebrew" / "pypi-tomli-w-1.2.0.json"
PLIST = ROOT / "launchd" / "io.github.mpsd.daemon.plist"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "resources", ROOT / "packaging" / "homebrew" / "resources.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("ruby") is None, reason="no ruby here (apt-get install ruby)")
def test_the_formula_is_valid_ruby() -> None:
    done = subprocess.run(["ruby", "-c", str(FORMULA)], capture_output=True, text=True)
    assert done.returncode == 0 and "Syntax OK" in done.stdout, done.stderr


def test_the_formula_follows_homebrews_conventions_for_a_python_tool_with_a_service() -> None:
    text = FORMULA.read_text()
    for needed in (
        "include Language::Python::Virtualenv",
        "virtualenv_install_with_resources",
        "depends_on :macos",
        'generate_completions_from_executable(bin/"mpsd", "completion")',
        'run [opt_bin/"mpsd", "daemon"]',
        "depends_on arch: :arm64",
        'log_path var/"log/mpsd.log"',
        'shell_output("#{bin}/mpsd --version")',
        "#{bin}/mpsd explain",
    ):
        assert needed in text, needed
    caveats = text[text.index("def caveats") : text.index("test do")]
    assert "mpsd install" in caveats and "brew services start mpsd" in caveats
    # Uninstall before the package goes: a removed program leaves launchd retrying it.
    assert caveats.index("mpsd uninstall") < caveats.index("brew uninstall mpsd")
    assert "Cellar" not in text.split("service do")[1].split("end")[0]


def test_the_formulas_resources_are_what_the_script_writes_from_pyproject() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "homebrew" / "resources.py"),
         "--report", str(REPORT), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resources = script()
    wanted = resources.dependencies(ROOT / "pyproject.toml")
    text = FORMULA.read_text()
    for name, unconditional in wanted.items():
        # tomli is for Python < 3.11 only: the formula's python@3.13 needs none.
        assert (f'resource "{name}" do' in text) == unconditional, name
    assert (
        resources.python_version(text)
        == json.loads(REPORT.read_text())["environment"]["python_version"]
    )


def test_the_script_refuses_a_report_without_a_dependency_or_with_a_wheel(tmp_path: Path) -> None:
    resources = script()
    report = json.loads(REPORT.read_text())
    wanted = resources.dependencies(ROOT / "pyproject.toml")
    short = copy.deepcopy(report)
    short["install"] = [i for i in short["install"] if i["metadata"]["name"] != "watchdog"]
    with pytest.raises(resources.Failure, match="lacks watchdog"):
        resources.resources(short, wanted, "3.13")
    wheel = copy.deepcopy(report)
    wheel["install"][0]["download_info"]["url"] = "https://example.org/psutil-7.2.2-cp36-abi3.whl"
    with pytest.raises(resources.Failure, match="not an sdist"):
        resources.resources(wheel, wanted, "3.13")
    with pytest.raises(resources.Failure, match=r"made with Python 3\.13"):
        resources.resources(report, wanted, "3.12")


def test_the_release_url_and_sha256_come_from_pypis_json_and_the_rest_stays(
    tmp_path: Path,
) -> None:
    """The sdist PyPI serves (its long URL, its sha256), for the version asked; the recorded
    JSON is tomli-w's, whose sdist the pip report names too: two sources, one answer."""
    resources = script()
    data = json.loads(PYPI_JSON.read_text())
    url, sha256 = resources.release_sdist(data, "tomli-w", "1.2.0")
    block = f'resource "tomli-w" do\n    url "{url}"\n    sha256 "{sha256}"\n  end'
    assert block in FORMULA.read_text()
    formula = tmp_path / "mpsd.rb"
    formula.write_text(FORMULA.read_text())
    args = ["--report", str(REPORT), "--formula", str(formula), "--pypi-json", str(PYPI_JSON)]
    args += ["--name", "tomli-w", "--version", "1.2.0"]
    assert resources.main(args) == 0
    new = formula.read_text()
    assert f'  url "{url}"\n  sha256 "{sha256}"\n  license' in new
    assert new.count("sha256 ") == FORMULA.read_text().count("sha256 ")
    assert resources.main([*args, "--check"]) == 0
    pyp_urls(new)  # the rule brew audit applies, on what the release writes


def test_the_script_refuses_pypi_json_of_another_version_or_without_an_sdist(
    capsys: pytest.CaptureFixture[str],
) -> None:
    resources = script()
    data = json.loads(PYPI_JSON.read_text())
    with pytest.raises(resources.Failure, match=r"for tomli-w 1\.2\.0, not mpsd 0\.1\.0"):
        resources.release_sdist(data, "mpsd", "0.1.0")
    data["urls"] = [u for u in data["urls"] if u["packagetype"] != "sdist"]
    with pytest.raises(resources.Failure, match=r"no sdist of tomli-w 1\.2\.0"):
        resources.release_sdist(data, "tomli-w", "1.2.0")
    # As a maintainer runs it: one sentence, exit 1, the formula untouched.
    args = ["--report", str(REPORT), "--pypi-json", str(PYPI_JSON), "--check"]
    assert resources.main(args) == 1
    assert capsys.readouterr().err.strip().endswith("not mpsd 0.1.0")


# -- the service block and mpsd's own agent ---------------------------------------------------


def service_block(text: str) -> str:
    return text[text.index("  service do\n") : text.index("\n  end\n", text.index("  service do"))]


def test_the_service_restarts_and_yields_as_mpsds_own_launchd_agent() -> None:
    """KeepAlive, ThrottleInterval, Nice and ProcessType, read from both; LowPriorityIO has no
    service-DSL key (Homebrew's service.rb), so the formula can only say so."""
    service = service_block(FORMULA.read_text())
    plist = plistlib.loads(PLIST.read_bytes())

    def value(key: str) -> str:
        found = re.findall(rf"(?m)^    {key} (.+)$", service)
        assert len(found) == 1, f"the service block sets {key} {len(found)} times"
        return found[0]

    keep_alive = {"successful_exit: false": {"SuccessfulExit": False}, "true": True}
    assert keep_alive.get(value("keep_alive")) == plist["KeepAlive"]
    assert int(value("throttle_interval")) == plist["ThrottleInterval"]
    assert int(value("nice")) == plist["Nice"]
    assert value("process_type") == ":" + plist["ProcessType"].lower()
    assert plist["LowPriorityIO"] is True
    assert (
        value("environment_variables") == 'LC_ALL: "C"'
        and plist["EnvironmentVariables"]["LC_ALL"] == "C"
    )
    assert "LowPriorityIO has no key in the service DSL" in FORMULA.read_text()


def test_the_systemd_unit_in_the_docs_restarts_and_yields_as_the_launchd_agent() -> None:
    """docs/install.md's `systemd --user` example for Linux: Restart=on-failure is launchd's
    SuccessfulExit false, RestartSec its ThrottleInterval, IOSchedulingClass=idle LowPriorityIO."""
    import configparser

    page = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    unit = configparser.ConfigParser(interpolation=None)
    unit.read_string(page.split("```ini\n")[1].split("```")[0])
    service, plist = unit["Service"], plistlib.loads(PLIST.read_bytes())
    assert plist["KeepAlive"] == {"SuccessfulExit": False} and service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) == plist["ThrottleInterval"]
    assert int(service["Nice"]) == plist["Nice"]
    assert plist["LowPriorityIO"] and service["IOSchedulingClass"] == "idle"
    assert service["ExecStart"].endswith("/mpsd daemon") and service["ExecStart"].startswith("%h/")


# -- `brew audit --strict`: the rules the formula is known to meet (Homebrew's rubocops) -------


def pyp_urls(text: str) -> None:
    """FormulaAudit/PyPiUrls (rubocops/urls.rb): the url and each resource in the long form PyPI
    serves, never pypi.python.org or files.pythonhosted.org/packages/source/. Before the first
    release the formula's own url is a placeholder, with an all-zero sha256 brew refuses."""
    urls = re.findall(r'(?m)^ +url "(.+)"$', text)
    placeholder = re.search(r'(?m)^  sha256 "0{64}"$', text) is not None
    for url in urls[1:] if placeholder else urls:
        assert not re.match(r"https?://pypi\.python\.org/", url), url
        assert script().LONG_FORM.match(url), url


def components_order(text: str) -> None:
    """FormulaAudit/ComponentsOrder: the stanzas in Homebrew's order."""
    order = ["include", "desc", "homepage", "url", "sha256", "license", "depends_on", "resource",
             "def install", "def caveats", "service do", "test do"]  # fmt: skip
    found = re.findall(r"(?m)^  (include|desc|homepage|url|sha256|license|depends_on|resource|"
                       r"def install|def caveats|service do|test do)\b", text)  # fmt: skip
    ranks = [order.index(name) for name in found]
    assert ranks == sorted(ranks) and set(found) == set(order), found


def desc(text: str) -> None:
    """FormulaAudit/Desc: under 80 characters, capitalised, no article first, no formula name,
    no full stop at the end."""
    (said,) = re.findall(r'(?m)^  desc "(.+)"$', text)
    assert len(said) < 80 and said[0].isupper() and not said.endswith(".")
    assert not re.match(r"(A|An|The) ", said) and "mpsd" not in said.lower()


def service_paths(text: str) -> None:
    """FormulaAudit/Service: a service runs opt_ paths (they survive an upgrade), never bin or
    the Cellar."""
    service = service_block(text)
    assert "opt_bin/" in service and not re.search(r"(?<!opt_)\bbin/|Cellar", service)


def dependency_order(text: str) -> None:
    """What Apple-Silicon-only formulas declare (asitop): the arch, macOS, then the python."""
    assert re.findall(r"(?m)^  depends_on (.+?)(?: #.*)?$", text) == [
        "arch: :arm64", ":macos", '"python@3.13"']  # fmt: skip


def the_test_block(text: str) -> None:
    """FormulaAudit/Test and GenerateCompletionsDSL: the test runs the program through
    shell_output (no backticks, no system with output), completions through Homebrew's helper."""
    body = text[text.index("  test do") :]
    assert "shell_output(" in body and "`" not in body.replace("`mpsd", "")
    assert "generate_completions_from_executable(" in text and "bash_completion.install" not in text


@pytest.mark.parametrize(
    "rule", [pyp_urls, components_order, desc, service_paths, dependency_order, the_test_block]
)
def test_the_formula_meets_brew_audit_strict(rule: Callable[[str], None]) -> None:
    rule(FORMULA.read_text())


def test_each_audit_rule_fails_on_a_formula_that_breaks_it() -> None:
    text = FORMULA.read_text()
    long = re.findall(r"https://files\.pythonhosted\.org/packages/../../[0-9a-f]+/", text)[0]
    short = "https://files.pythonhosted.org/packages/source/t/tomli-w/"
    order = text.replace("  def caveats", "  def kaveats").replace(
        "  test do", "  def caveats\n  end\n  test do"
    )
    backticks = "`#{bin}/mpsd --version`"
    broken = {
        pyp_urls: text.replace(long, short),
        components_order: order,
        desc: text.replace('desc "Keeps', 'desc "mpsd keeps'),
        service_paths: text.replace('run [opt_bin/"mpsd"', 'run [bin/"mpsd"'),
        dependency_order: text.replace("  depends_on arch: :arm64 ", "  depends_on :arm64 "),
        the_test_block: text.replace('shell_output("#{bin}/mpsd --version")', backticks),
    }
    for rule, bad in broken.items():
        assert bad != text, rule.__name__
        with pytest.raises(AssertionError):
            rule(bad)
