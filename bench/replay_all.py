"""Replay every trace of bench/traces/MANIFEST.csv and print each summary.

python bench/make_traces.py && python bench/replay_all.py [--config FILE] [--without NAME]

``--without`` turns a mechanism of the policy off (bench/replay.py's ``WITHOUT``): the traces
that then miss a goal are the ones docs/policy.md names for it.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=HERE / "traces")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--without", default="")
    args = parser.parse_args()
    manifest = args.traces / "MANIFEST.csv"
    if not manifest.exists():
        sys.stderr.write(f"no {manifest}: run bench/make_traces.py first.\n")
        return 2
    with manifest.open(newline="") as handle:
        rows = list(csv.DictReader(handle))

    def replay(row: dict[str, str]) -> str:
        command = [
            sys.executable,
            str(HERE / "replay.py"),
            str(args.traces / f"{row['trace']}.csv"),
            "--total-bytes",
            row["total_bytes"],
            "--recommended-max-bytes",
            row["recommended_max_bytes"],
        ]
        if args.config:
            command += ["--config", str(args.config)]
        if args.without:
            command += ["--without", args.without]
        done = subprocess.run(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
        )
        return f"## {row['trace']}: {row['about']}\n{done.stderr}"

    shares: list[float] = []
    exceeded = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for text in pool.map(replay, rows):
            lines = text.splitlines()
            for line in lines:
                if line.startswith("summary-json: "):
                    summary = json.loads(line.removeprefix("summary-json: "))
                    shares += summary["shares"]
                    exceeded += summary["exceeded"]
            print("\n".join(line for line in lines if not line.startswith("summary-json")))
            print()
    if shares:
        print(
            f"ALL TRACES: {len(shares)} jobs; limit above really free at a job's start: "
            f"{exceeded} (goal 0); share of really free used: median "
            f"{statistics.median(shares):.0%}, min {min(shares):.0%} (goal >= 75% median)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
