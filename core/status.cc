#include "core/status.h"

namespace tessel {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInternal:
      return "internal error";
    case Code::kUsage:
      return "usage error";
    case Code::kBadData:
      return "bad input data";
    case Code::kPlugin:
      return "plugin error";
    case Code::kRankFailed:
      return "rank failed";
    case Code::kStorage:
      return "storage error";
    case Code::kStopped:
      return "stopped";
    case Code::kBadLoss:
      return "bad loss";
  }
  return "unknown";
}

Status::Status(Code code, std::string message) {
  if (code != Code::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code(), std::string(context) + ": " + message());
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code())) + ": " + message();
}

Status UsageError(std::string message) { return Status(Code::kUsage, std::move(message)); }
Status BadDataError(std::string message) { return Status(Code::kBadData, std::move(message)); }
Status PluginError(std::string message) { return Status(Code::kPlugin, std::move(message)); }
Status RankFailedError(std::string message) { return Status(Code::kRankFailed, std::move(message)); }
Status StorageError(std::string message) { return Status(Code::kStorage, std::move(message)); }
Status InternalError(std::string message) { return Status(Code::kInternal, std::move(message)); }

}  // namespace tessel
