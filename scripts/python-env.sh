#!/usr/bin/env bash
# Builds the project's Python environment, .venv/, from python/requirements.lock (exact versions:
# CPU torch, numpy, ml_dtypes, safetensors, transformers, onnxruntime, pytest and their dependencies).
#
# Packages come from the machine's local package sources alone, as `pip config list` names them
# (find-links folders and file:// indexes); the public index is never asked, so an install that
# cannot be satisfied fails at once instead of retrying a network that is not there. Where pip's
# configuration names no local source, plain `pip install` is used (a machine with network access).
#
# Idempotent: .venv/.lock-sha256 records the lockfile it was built from; a matching venv is kept.
# Exit status ≠ 0, with the reason on stderr, when the environment cannot be built.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=python/requirements.lock
venv=.venv
python=${QRL_PYTHON:-python3}
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [[ -x $venv/bin/python3 && -f $venv/.lock-sha256 && $(cat "$venv/.lock-sha256") == "$want" ]]; then
  exit 0
fi
command -v "$python" >/dev/null || { echo "python-env: $python not found (Python 3.11 is required)" >&2; exit 1; }
args=()
have_index=0
have_links=0
declare -A seen=()
while IFS= read -r line; do
  key=${line%%=*}
  value=${line#*=}
  value=${value#\'}
  value=${value%\'}
  for v in $value; do
    [[ -n ${seen[$v]:-} ]] && continue
    case $key in
      *.find-links) args+=(--find-links "$v"); have_links=1; seen[$v]=1 ;;
      *.index-url|*.extra-index-url)
        if [[ $v == file://* ]]; then
          if [[ $have_index -eq 0 ]]; then args+=(--index-url "$v"); have_index=1; else args+=(--extra-index-url "$v"); fi
          seen[$v]=1
        fi ;;
    esac
  done
done < <("$python" -m pip config list 2>/dev/null)
# find-links alone: --no-index keeps pip off the public index; with a file:// index it replaces the default one.
if [[ $have_links -eq 1 && $have_index -eq 0 ]]; then args+=(--no-index); fi
echo "python-env: building $venv from $lock (${args[*]:-default index})" >&2
start=$SECONDS
rm -rf "$venv"
"$python" -m venv "$venv"
if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --no-deps --require-virtualenv "${args[@]}" -r "$lock" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); then
  echo "python-env: cannot install $lock from the local package sources (${args[*]:-default index}); nothing else installs it" >&2
  rm -rf "$venv"
  exit 1
fi
"$venv/bin/python3" -m pip check >/dev/null || { echo "python-env: pip check failed in $venv" >&2; "$venv/bin/python3" -m pip check >&2; exit 1; }
echo "$want" > "$venv/.lock-sha256"
echo "python-env: $venv ready in $((SECONDS - start)) s" >&2
