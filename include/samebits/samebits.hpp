// The one public C++ header of samebits: every inference class, its state, the lowbit formats and the
// engine controls. Models are immutable and may be shared by threads; states belong to one caller and are
// copied only explicitly (clone()).
#pragma once

#include "api/mamba3_inference.hpp"
#include "api/mamba_inference.hpp"
#include "api/samba_inference.hpp"
#include "api/samebits.hpp"
#include "api/transformer_inference.hpp"
