// The public C++ API of samebits in one include: every inference class with its state, checkpoint
// inspection, lowbit weight formats, engine controls and errors. Models are immutable and may be shared
// by threads; states belong to one caller and are copied only explicitly (clone()).
#pragma once

#include <samebits/causal_lm.hpp>
#include <samebits/chat_template.hpp>
#include <samebits/checkpoint.hpp>
#include <samebits/checkpoint_info.hpp>
#include <samebits/engine.hpp>
#include <samebits/errors.hpp>
#include <samebits/file_kind.hpp>
#include <samebits/gguf.hpp>
#include <samebits/json.hpp>
#include <samebits/lowbit.hpp>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/mlp.hpp>
#include <samebits/pin.hpp>
#include <samebits/samba.hpp>
#include <samebits/sampler.hpp>
#include <samebits/scoring.hpp>
#include <samebits/state_file.hpp>
#include <samebits/tensor.hpp>
#include <samebits/tokenizer.hpp>
#include <samebits/transformer.hpp>
