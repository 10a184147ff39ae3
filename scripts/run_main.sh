#!/usr/bin/env bash
# The main job: build samebits, then load the bundled MLP checkpoint, show it and print its logits.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/samebits info assets/mlp-demo.ckpt
echo
./build/samebits mlp-predict assets/mlp-demo.ckpt
