#include "workers/executor_registry.h"

#include "workers/llm/gpt_stage.h"
#include "workers/rgnn/rgnn_executor.h"

namespace tessel::workers {

const std::vector<ExecutorFactory>& Executors() {
  static const std::vector<ExecutorFactory> factories = {
      RgnnFullGraphFactory(),
      RgnnSampledFactory(),
      LlmStageFactory(),
  };
  return factories;
}

Result<const ExecutorFactory*> FindExecutor(std::string_view kind) {
  std::string known;
  for (const ExecutorFactory& f : Executors()) {
    if (f.kind == kind) return &f;
    known += StrCat(known.empty() ? "" : ", ", f.kind);
  }
  return InternalError(StrCat("no executor for assignments of kind '", kind, "' in this build (it has ", known,
                              "): do the ranks run different builds?"));
}

}  // namespace tessel::workers
