#include "core/model_keys.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tessel {
namespace {

struct KeyRegistry {
  std::mutex mu;
  bool sealed = false;
  std::vector<RegisteredModelKey> keys;
};

KeyRegistry& TheKeyRegistry() {
  static KeyRegistry registry;
  return registry;
}

[[noreturn]] void Refuse(std::string_view model, std::string_view key, std::string_view why) {
  std::fprintf(stderr, "tessel: internal error: model \"%.*s\" registering key '%.*s': %.*s\n",
               static_cast<int>(model.size()), model.data(), static_cast<int>(key.size()), key.data(),
               static_cast<int>(why.size()), why.data());
  std::abort();
}

}  // namespace

void RegisterModelKeys(std::string_view model, std::span<const ModelKey* const> keys) {
  KeyRegistry& r = TheKeyRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const ModelKey* key : keys) {
    if (!key->key.starts_with("model.") || key->key.find('.', 6) != std::string_view::npos) {
      Refuse(model, key->key, "a model's key is a key of the [model] section (model.NAME)");
    }
    for (const RegisteredModelKey& k : r.keys) {
      if (k.key->key == key->key) Refuse(model, key->key, std::string("model \"") + std::string(k.model) + "\" has it");
    }
    if (r.sealed) Refuse(model, key->key, "the job schema has been read already; register before main");
    r.keys.push_back({model, key});
  }
}

std::span<const RegisteredModelKey> SealModelKeys() {
  KeyRegistry& r = TheKeyRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.sealed = true;
  return r.keys;
}

}  // namespace tessel
