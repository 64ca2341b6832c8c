#!/usr/bin/env bash
# check-format.sh [--fix]: every tracked C++ and CUDA source of the repository against its .clang-format
# (clang-format 14, Debian's; scripts/setup-deps.sh installs it). Lists each file that differs and exits 1;
# --fix rewrites them instead. CTest runs it as `source_format`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = --fix ]; then
  clang-format --style=file -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format; scripts/check-format.sh --fix rewrites them" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
