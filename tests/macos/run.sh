#!/bin/sh
# Every check in tests/macos, the same on a Mac user's machine and in CI's macOS job (GitHub's
# arm64 runners: real macOS on Apple Silicon, but no MPS; those checks skip, saying so).
# Usage: tests/macos/run.sh [pytest options]; PYTHON=path picks the venv's python.
set -eu
cd "$(dirname "$0")/../.."
python=${PYTHON:-.venv/bin/python}
if [ "$(uname -s)" != Darwin ]; then
  echo "tests/macos/run.sh: these checks need macOS (this is $(uname -s))" >&2
  exit 2
fi
"$python" -c 'import platform, sys; print("macOS", platform.mac_ver()[0], platform.machine(), "Python", sys.version.split()[0])'
exec "$python" -m pytest -m macos tests/macos -q -rs "$@"
