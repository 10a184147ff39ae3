// Conversions shared by the Samba binding files.
#pragma once

#include <nanobind/nanobind.h>

#include <samebits/samba.hpp>

namespace samebits::python {

// A SambaConfig from its to_dict() form (the ten keys), validated; refusals are ValueError.
SambaConfig samba_config_of(const nanobind::dict& fields);
// config.to_dict(): the ten keys as Python values.
nanobind::object samba_config_dict(const SambaConfig& config);
// The state's layers moved into a list, in stack order: a Mamba3StateEngine or a TransformerStateEngine each
// (what a Python SambaState holds); `state` keeps empty layers.
nanobind::list layer_list(SambaState& state);

}  // namespace samebits::python
