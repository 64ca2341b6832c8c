#include "workers/plugin_host/host_status.h"

#include <new>

#include "core/logging.h"

namespace tessel::workers {
namespace {

tessel_status* OutOfMemoryStatus() {
  static tessel_status status{TESSEL_STATUS_INTERNAL, "out of memory while making a status"};
  return &status;
}

Code CodeFromPlugin(int32_t code) {
  switch (code) {
    case TESSEL_STATUS_INVALID_ARGUMENT:
      return Code::kUsage;
    case TESSEL_STATUS_BAD_DATA:
      return Code::kBadData;
    case TESSEL_STATUS_PLUGIN:
      return Code::kPlugin;
    default:
      return Code::kInternal;
  }
}

}  // namespace

tessel_status* MakeHostStatus(int32_t code, const char* message) noexcept {
  try {
    return new tessel_status{code, message ? message : "(no message)"};
  } catch (...) {
    return OutOfMemoryStatus();
  }
}

Status TakeStatus(tessel_status* status, std::string_view context) {
  if (status == nullptr) return Status::Ok();
  Status result(CodeFromPlugin(status->code), StrCat(context, ": ", status->message));
  if (status != OutOfMemoryStatus()) delete status;
  return result;
}

}  // namespace tessel::workers
