// The coordinator's progress display: a redrawn bar on a terminal, plain log lines otherwise.
// Thread safety: one thread (the coordinator's). Fails never: it writes to stderr or the log.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/logging.h"
#include "workers/protocol.h"

namespace tessel::orchestrator {

class ProgressPrinter {
 public:
  ProgressPrinter(std::string unit, int64_t steps, int32_t every, const Logger& log)
      : unit_(std::move(unit)),
        steps_(steps),
        every_(std::max(1, every)),
        log_(log),
        tty_(isatty(STDERR_FILENO) != 0) {}

  void Step(const workers::ProgressMsg& p) {
    total_seconds_ += p.seconds;
    const double eta = total_seconds_ / static_cast<double>(p.step) * static_cast<double>(steps_ - p.step);
    const std::string shown = FormatScalars(p.shown);
    char line[400];
    if (tty_) {
      const int width = 24;
      const int filled = static_cast<int>(width * p.step / std::max<int64_t>(1, steps_));
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(static_cast<size_t>(width), '.');
      std::snprintf(line, sizeof line, "\r[%s] %s %lld/%lld  loss %.4f%s%s  %.1f ms/%s  ETA %.0f s ", bar.c_str(),
                    unit_.c_str(), static_cast<long long>(p.step), static_cast<long long>(steps_), p.loss,
                    shown.empty() ? "" : "  ", shown.c_str(), p.seconds * 1e3, unit_.c_str(), eta);
      std::fputs(line, stderr);
      if (p.step == steps_) std::fputs("\n", stderr);
      std::fflush(stderr);
      return;
    }
    if (p.step % every_ != 0 && p.step != steps_ && p.step != 1) return;
    std::snprintf(line, sizeof line, "%s %lld/%lld loss %.6f%s%s (%.1f ms)", unit_.c_str(),
                  static_cast<long long>(p.step), static_cast<long long>(steps_), p.loss, shown.empty() ? "" : ", ",
                  shown.c_str(), p.seconds * 1e3);
    log_.Info(line);
  }

 private:
  std::string unit_;
  int64_t steps_;
  int64_t every_;
  const Logger& log_;
  bool tty_;
  double total_seconds_ = 0;
};

}  // namespace tessel::orchestrator
