// The RGNN model registry: every model an rgnn job's `model.name` may name (model.h). The built-in ones
// are listed once, in model_registry.cc; a model from outside the tree (a test, a program that embeds
// Tessel) is added with RegisterRgnnModel before main (a static initialiser, as tests/integration/
// toy_model/mean_model.cc does): the model's own keys (RgnnModel::Keys) then become job keys, and the job
// schema is read, and sealed, in main.
// Ownership: models are kept by pointer and must live for the process. Thread safety: FindRgnnModel and
// RgnnModelNames from any thread once registration is over; RegisterRgnnModel only while no job runs.
// Failure: lookups return null; a name that is taken is refused (false).
#pragma once

#include <string_view>
#include <vector>

#include "workers/rgnn/model.h"

namespace tessel::workers {

// The model registered as `name`, or null.
const RgnnModel* FindRgnnModel(std::string_view name);
// Every registered name, built-in ones first: "rgcn", "rgat", "hgt", ...
std::vector<std::string_view> RgnnModelNames();
// Adds a model. A second model of a taken name replaces nothing and returns false.
bool RegisterRgnnModel(const RgnnModel* model);

}  // namespace tessel::workers
