#!/usr/bin/env bash
# The project's formatting, checked (ctest's `format` test) or applied:
#   scripts/check-format.sh          fails listing every file not formatted
#   scripts/check-format.sh --fix    formats them
# C and C++ with clang-format (LLVM style, .clang-format), Python with black.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
mapfile -t cxx < <(git ls-files '*.cpp' '*.h' '*.c' '*.cu' '*.cuh')
mapfile -t py < <(git ls-files '*.py')
status=0
if [ $fix -eq 1 ]; then
  clang-format -i "${cxx[@]}"
  black -q "${py[@]}"
  exit 0
fi
bad=()
for f in "${cxx[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not clang-formatted (scripts/check-format.sh --fix):\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  status=1
fi
if ! out=$(black --check "${py[@]}" 2>&1); then
  printf 'not black-formatted (scripts/check-format.sh --fix):\n' >&2
  grep '^would reformat' <<<"$out" | sed 's/^would reformat /  /' >&2 || true
  status=1
fi
[ $status -eq 0 ] && echo "check-format: ${#cxx[@]} C/C++ and ${#py[@]} Python files formatted"
exit $status
