#!/usr/bin/env bash
# Build the sdist and the wheel (python -m build makes the wheel from the sdist, so a file
# missing from the sdist breaks the wheel too), install the wheel into a fresh virtual
# environment in an empty temporary folder, and run .ci/wheel_smoke.py there: nothing from the
# clone is importable, so the installed package must stand alone. First the core install
# (gymnasium, numpy and numba only), then with the [policy] extra for the shipped agent.
#
#   bash .ci/wheel_smoke.sh            # needs `build` in the current python (pip install build)
#   PYTHON=python3.12 bash .ci/wheel_smoke.sh
#   KEEP_DIST=dist bash .ci/wheel_smoke.sh    # also keep the built sdist and wheel in dist/
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
"$python" -m build --version >/dev/null 2>&1 || {
  echo "wheel_smoke.sh: '$python -m build' is missing: pip install build" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "+ $python -m build --outdir $work/dist"
"$python" -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || {
  cat "$work/build.log" >&2
  exit 1
}
wheels=("$work"/dist/*.whl)
sdists=("$work"/dist/*.tar.gz)
[[ ${#wheels[@]} -eq 1 && ${#sdists[@]} -eq 1 ]] || { echo "expected one wheel and one sdist" >&2; exit 1; }
wheel=${wheels[0]}
echo "built $(basename "$wheel") and $(basename "${sdists[0]}")"
if [[ -n ${KEEP_DIST:-} ]]; then
  mkdir -p "$KEEP_DIST" && cp "$wheel" "${sdists[0]}" "$KEEP_DIST"/
fi

"$python" -m venv "$work/venv"
mkdir "$work/try"
cp "$repo/.ci/wheel_smoke.py" "$work/try/"
cp "$repo/tests/data/rounds.jsonl" "$work/try/records.jsonl"
cd "$work/try"    # an empty folder: the clone is neither the working folder nor on the path
venv_python="$work/venv/bin/python"

echo "+ pip install $(basename "$wheel")"
"$venv_python" -m pip install --quiet "$wheel"
"$venv_python" wheel_smoke.py core records.jsonl

echo "+ pip install \"$(basename "$wheel")[policy]\""
"$venv_python" -m pip install --quiet "$wheel[policy]"
"$venv_python" wheel_smoke.py policy
