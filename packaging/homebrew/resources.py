"""Write the formula's resources (packaging/homebrew/mpsd.rb): one per runtime dependency, the
sdist's url and sha256, as pip resolves pyproject.toml's dependencies for the formula's python.

At a release, once PyPI has it, with the formula's python (python@3.13: `python3.13`), from the
repository root at the release's tag:

    python3.13 packaging/homebrew/resources.py --release

pip resolves the dependencies from sdists only (Homebrew builds from them) into a report
(`pip install --dry-run --report`); `--report FILE` reads a recorded one instead (the tests do).
`--release` also sets the formula's own url and sha256 from PyPI's JSON for the version in
mpsd/__init__.py: the long URL PyPI serves (`brew audit`'s PyPiUrls rule) and the hash of the
file users download (a local build's can differ); `--pypi-json FILE` reads a recorded response.
`--check` changes nothing and exits 1 when the formula differs from what it would write.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
FORMULA = ROOT / "packaging" / "homebrew" / "mpsd.rb"
BEGIN = "  # Resources: written by packaging/homebrew/resources.py from pyproject.toml.\n"
END = "  # End of resources.\n"
# The form PyPI serves its files in; `packages/source/...` is the short form brew audit refuses.
LONG_FORM = re.compile(
    r"https://files\.pythonhosted\.org/packages/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/"
)


class Failure(Exception):
    """One sentence for the maintainer; the script exits 1 with it."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dependencies(pyproject: Path) -> dict[str, bool]:
    """pyproject's runtime dependencies: canonical name -> True when unconditional (no marker:
    it must be a resource), False when a marker may leave it out (tomli before 3.11)."""
    found = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    result = {}
    for requirement in found:
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if name is None:
            raise Failure(f"cannot read the dependency {requirement!r} in {pyproject}")
        result[canonical(name.group(1))] = ";" not in requirement
    return result


def python_version(formula: str) -> str:
    """The X.Y of the formula's ``depends_on "python@X.Y"``."""
    match = re.search(r'depends_on "python@(\d+\.\d+)"', formula)
    if match is None:
        raise Failure('the formula has no `depends_on "python@3.x"`')
    return match.group(1)


def pip_report(requirements: list[str], version: str) -> dict:
    """pip's resolution of ``requirements`` from sdists, for this interpreter."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if here != version:
        raise Failure(f"run this with python{version}, the formula's python (this is {here})")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run"]
        command += ["--ignore-installed", "--no-binary", ":all:", "--report", str(report)]
        subprocess.run([*command, *requirements], check=True)
        return json.loads(report.read_text(encoding="utf-8"))


def resources(report: dict, wanted: dict[str, bool], version: str) -> str:
    """The resource blocks (sorted by name) for every package of ``report``."""
    said = report.get("environment", {}).get("python_version")
    if said != version:
        raise Failure(f"the report was made with Python {said}, the formula uses {version}")
    blocks = {}
    for item in report["install"]:
        name = canonical(item["metadata"]["name"])
        info = item["download_info"]
        url, sha256 = info["url"], info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not url.endswith((".tar.gz", ".zip")) or not sha256:
            raise Failure(f"{name}: {url} is not an sdist with a sha256 (Homebrew builds sdists)")
        if not LONG_FORM.match(url):
            raise Failure(f"{name}: {url} is not in the long form PyPI serves")
        blocks[name] = f'  resource "{name}" do\n    url "{url}"\n    sha256 "{sha256}"\n  end\n'
    missing = sorted(name for name, needed in wanted.items() if needed and name not in blocks)
    if missing:
        raise Failure(f"the report lacks {', '.join(missing)}, a dependency in pyproject.toml")
    return "\n".join(blocks[name] for name in sorted(blocks))


def release_sdist(data: dict, name: str, version: str) -> tuple[str, str]:
    """The url and sha256 of the sdist in PyPI's JSON for ``name`` ``version``."""
    info = data.get("info", {})
    said = (canonical(str(info.get("name"))), info.get("version"))
    if said != (canonical(name), version):
        raise Failure(f"PyPI's JSON is for {said[0]} {said[1]}, not {name} {version}")
    for item in data.get("urls", []):
        if item.get("packagetype") == "sdist" and LONG_FORM.match(item.get("url", "")):
            return item["url"], item["digests"]["sha256"]
    raise Failure(f"PyPI has no sdist of {name} {version} (publish the release first)")


def pypi_json(name: str, version: str) -> dict:
    import urllib.request

    url = f"https://pypi.org/pypi/{name}/{version}/json"
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read())


def rewrite(formula: str, blocks: str, release: tuple[str, str] | None) -> str:
    """``formula`` with ``blocks`` between its resource markers (and the release's url, sha256)."""
    start, end = formula.find(BEGIN), formula.find(END)
    if start < 0 or end < start:
        raise Failure("the formula lacks its resource markers (# Resources: ... # End of ...)")
    formula = formula[: start + len(BEGIN)] + blocks + formula[end:]
    if release is not None:
        url, digest = release
        formula = re.sub(r'(?m)^  url ".*"$', f'  url "{url}"', formula, count=1)
        formula = re.sub(r'(?m)^  sha256 ".*"$', f'  sha256 "{digest}"', formula, count=1)
    return formula


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="a recorded `pip install --report` file")
    parser.add_argument("--release", action="store_true", help="set url and sha256 from PyPI")
    parser.add_argument("--pypi-json", type=Path, help="a recorded PyPI JSON for --release")
    parser.add_argument("--name", default="mpsd", help=argparse.SUPPRESS)  # for the tests
    parser.add_argument("--version", help=argparse.SUPPRESS)  # default: mpsd/__init__.py's
    parser.add_argument("--formula", type=Path, default=FORMULA)
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        formula = args.formula.read_text(encoding="utf-8")
        version = python_version(formula)
        wanted = dependencies(args.pyproject)
        if args.report is not None:
            report = json.loads(args.report.read_text(encoding="utf-8"))
        else:
            requirements = tomllib.loads(args.pyproject.read_text(encoding="utf-8"))["project"]
            report = pip_report(requirements["dependencies"], version)
        release = None
        if args.release or args.pypi_json is not None:
            init = (ROOT / "mpsd" / "__init__.py").read_text(encoding="utf-8")
            ours = args.version or re.findall(r'(?m)^__version__ = "(.+)"$', init)[0]
            data = (
                json.loads(args.pypi_json.read_text(encoding="utf-8"))
                if args.pypi_json is not None
                else pypi_json(args.name, ours)
            )
            release = release_sdist(data, args.name, ours)
        new = rewrite(formula, resources(report, wanted, version), release)
    except (Failure, OSError, LookupError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"resources.py: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if new != formula:
            print(f"{args.formula}'s resources are not what resources.py writes", file=sys.stderr)
        return int(new != formula)
    if new != formula:
        args.formula.write_text(new, encoding="utf-8")
        print(f"wrote {args.formula}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
