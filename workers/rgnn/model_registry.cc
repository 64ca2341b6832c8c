#include "workers/rgnn/model_registry.h"

#include <mutex>

#include "workers/rgnn/layers/hgt_layer.h"
#include "workers/rgnn/layers/rgat_layer.h"
#include "workers/rgnn/layers/rgcn_layer.h"

namespace tessel::workers {
namespace {

struct Registry {
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
  r.models.push_back(model);
  return true;
}

}  // namespace tessel::workers
