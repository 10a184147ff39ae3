#!/usr/bin/env bash
# The main job: build samebits, then generate text with the shipped default model (a byte-level Samba
# language model trained on the King James Bible; assets/default-model/MODEL_CARD.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/samebits generate --prompt "${1:-And God said}" --max-tokens "${2:-200}" --seed 1
