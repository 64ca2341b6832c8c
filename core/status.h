// Status and Result<T>: the one error style inside Tessel's C++ code.
//
// A Status is cheap to copy when OK (no allocation). Each error carries a Code that maps one-to-one onto
// the process exit codes of DESIGN.md, so the CLI never has to guess how to exit.
// Thread safety: values; any thread may create, copy and read them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessel {

// The numeric values are the process exit codes.
enum class Code : int {
  kOk = 0,
  kInternal = 1,    // a bug in Tessel
  kUsage = 2,       // bad command line or job file
  kBadData = 3,     // bad input data (graph files, datasets)
  kPlugin = 4,      // a plugin could not be loaded or lacks an op
  kRankFailed = 5,  // a rank failed or timed out
  kStorage = 6,     // disk full, corrupt file, I/O error
  kStopped = 7,     // stopped by SIGTERM, SIGINT or SIGUSR1 after saving its state (core/stop_signal.h)
  kBadLoss = 8,     // the training loss became NaN or infinite, or exploded (train.on_bad_loss = "stop")
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message);

  static Status Ok() { return Status(); }
  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const;
  int exit_code() const { return static_cast<int>(code()); }

  // Returns a copy whose message is "context: message". OK stays OK.
  Status WithContext(std::string_view context) const;
  std::string ToString() const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

Status UsageError(std::string message);
Status BadDataError(std::string message);
Status PluginError(std::string message);
Status RankFailedError(std::string message);
Status StorageError(std::string message);
Status InternalError(std::string message);

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tessel

#define TESSEL_CONCAT_INNER(a, b) a##b
#define TESSEL_CONCAT(a, b) TESSEL_CONCAT_INNER(a, b)

#define TESSEL_RETURN_IF_ERROR(expr)         \
  do {                                       \
    ::tessel::Status _tessel_st = (expr);    \
    if (!_tessel_st.ok()) return _tessel_st; \
  } while (0)

#define TESSEL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// TESSEL_ASSIGN_OR_RETURN(auto x, MakeX()); or TESSEL_ASSIGN_OR_RETURN(x, MakeX());
#define TESSEL_ASSIGN_OR_RETURN(lhs, expr) \
  TESSEL_ASSIGN_OR_RETURN_IMPL(TESSEL_CONCAT(_tessel_res_, __LINE__), lhs, expr)
