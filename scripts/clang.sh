#!/usr/bin/env bash
# Prints the path of clang with its sanitizer runtimes (the native scanner's ASan/UBSan build for fuzzing:
# tests/native/native_fuzz.py), installing Debian's clang-14 and libclang-rt-14-dev with apt-get the first time when it
# runs as root (CI does: .ci/run calls this). Elsewhere it only looks, and says what to install.
#
#   CLANG="$(bash scripts/clang.sh)"
set -euo pipefail
RUNTIME=/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.asan_static-x86_64.a
found() { command -v clang-14 >/dev/null 2>&1 && ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.asan_static-x86_64.a >/dev/null 2>&1; }
if ! found; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing clang-14 and libclang-rt-14-dev (apt-get) for the sanitizer build" >&2
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get update -qq >&2 || true
    timeout 900 apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >&2
  else
    echo "clang-14 with its sanitizer runtimes is missing ($RUNTIME): apt-get install clang-14 libclang-rt-14-dev" >&2
    exit 1
  fi
fi
command -v clang-14
