// Watches the training loss for train.on_bad_loss: a loss that is NaN or infinite, or that has exploded
// (above train.bad_loss_factor x the median of the last train.bad_loss_window steps' losses, and above the
// first step's loss, so that the noise of a loss near zero never counts as an explosion).
//
// Thread safety: one thread. Failure: none; Check returns the verdict.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "core/logging.h"

namespace tessel::workers {

class LossWatch {
 public:
  LossWatch(double factor, int32_t window) : factor_(factor), window_(std::max<int32_t>(1, window)) {}

  // "" when `loss` is fine; else why it is bad, naming the step and the value ("the loss became nan at step 4",
  // "the loss exploded to 3.1e+10 at step 2, 5.6e+09 x the median 5.53 of the last 1 steps").
  // A bad loss does not enter the window.
  std::string Check(const std::string& unit, int64_t step, double loss) {
    if (!std::isfinite(loss)) {
      return StrCat("the loss became ", std::isnan(loss) ? "NaN" : loss > 0 ? "+Inf" : "-Inf", " at ", unit, " ", step);
    }
    if (!recent_.empty()) {
      std::vector<double> sorted(recent_.begin(), recent_.end());
      std::sort(sorted.begin(), sorted.end());
      const size_t n = sorted.size();
      const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
      if (loss > factor_ * median && loss > first_ && median > 0) {
        char text[160];
        std::snprintf(text, sizeof text,
                      "the loss exploded to %.6g at %s %lld, %.3g x the median %.6g of the last %zu %ss", loss,
                      unit.c_str(), static_cast<long long>(step), loss / median, median, n, unit.c_str());
        return text;
      }
    }
    if (recent_.empty() && std::isnan(first_)) first_ = loss;
    recent_.push_back(loss);
    if (recent_.size() > static_cast<size_t>(window_)) recent_.pop_front();
    return "";
  }

 private:
  double factor_;
  int32_t window_;
  double first_ = std::nan("");
  std::deque<double> recent_;
};

}  // namespace tessel::workers
