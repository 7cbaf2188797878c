// ReduceLROnPlateau's epoch-end rule.
#include "fleet/fit/lr_plateau.h"

#include <algorithm>

#include "loss/loss.h"

namespace nnfleet {

bool monitor_goes_up(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  const std::string name = monitor.rfind("val_", 0) == 0 ? monitor.substr(4) : monitor;
  if (name == "loss") return false;
  return metric_goes_up(name);
}

double plateau_epoch_end(const ReduceLrOnPlateau& r, bool up, double current, double rate,
                         PlateauState& st) {
  if (st.cooldown_counter > 0) {
    --st.cooldown_counter;
    st.wait = 0;
  }
  // MonitorCallback._is_improvement: monitor_op(current - min_delta', best), min_delta' negated
  // for "min"; the first value always improves.
  const bool better =
      !st.has_best ||
      (up ? static_cast<float>(current - r.min_delta) > static_cast<float>(st.best)
          : static_cast<float>(current + r.min_delta) < static_cast<float>(st.best));
  if (better) {
    st.has_best = true;
    st.best = current;
    st.wait = 0;
    return rate;
  }
  if (st.cooldown_counter > 0) return rate;
  if (++st.wait < r.patience) return rate;
  const double old_lr = static_cast<float>(rate);
  if (!(old_lr > static_cast<double>(static_cast<float>(r.min_lr)))) return rate;
  st.cooldown_counter = r.cooldown;
  st.wait = 0;
  return static_cast<float>(std::max(old_lr * r.factor, r.min_lr));
}

}  // namespace nnfleet
