#include "workers/rgnn/model_registry.h"

#include <mutex>

#include "workers/rgnn/layers/hgt_layer.h"
#include "workers/rgnn/layers/rgat_layer.h"
#include "workers/rgnn/layers/rgcn_layer.h"

namespace tessel::workers {
namespace {

void RegisterKeysOf(const RgnnModel& model) {
  const std::vector<const ModelKey*> keys = model.Keys();
  RegisterModelKeys(model.name(), keys);
}

struct Registry {
  Registry() {
    for (const RgnnModel* m : models) RegisterKeysOf(*m);
  }
  std::mutex mu;
  std::vector<const RgnnModel*> models = {
      &RgcnModel(),
      &RgatModel(),
      &HgtModel(),
  };
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

// The built-in models' keys join the job schema before main, which reads it (core/model_keys.h): this file
// is linked wherever a job can name a model.
[[maybe_unused]] const bool kBuiltInKeysRegistered = (TheRegistry(), true);

}  // namespace

const RgnnModel* FindRgnnModel(std::string_view name) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const RgnnModel* m : r.models) {
    if (m->name() == name) return m;
  }
  return nullptr;
}

std::vector<std::string_view> RgnnModelNames() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string_view> names;
  for (const RgnnModel* m : r.models) names.push_back(m->name());
  return names;
}

bool RegisterRgnnModel(const RgnnModel* model) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const RgnnModel* m : r.models) {
    if (m->name() == model->name()) return false;
  }
  RegisterKeysOf(*model);
  r.models.push_back(model);
  return true;
}

}  // namespace tessel::workers
