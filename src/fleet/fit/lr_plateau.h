// ReduceLROnPlateau as Keras runs it at every epoch end (keras/src/callbacks/
// reduce_lr_on_plateau.py and monitor_callback.py), as a small state machine whose state goes
// into checkpoints, so a resumed run reduces the rate at the same epochs.
// In fit/ because its state is the fit loop's: run_job steps it and checkpoint.h stores it.
#pragma once

#include <string>

#include "plan/plan.h"

namespace nnfleet {

struct PlateauState {
  bool has_best = false;
  double best = 0.0;
  int wait = 0;
  int cooldown_counter = 0;
};

// Whether a monitored quantity improves upward, as Keras's MonitorCallback decides it: `mode`
// "max" or "min" as given; "auto": "loss" and "val_loss" go down, any other "[val_]<metric key>"
// goes the way the metric's Keras class says (accuracies, precision, recall, AUC and r2_score
// up; errors down).
bool monitor_goes_up(const std::string& monitor, const std::string& mode);

// One epoch end with the monitored value `current`; returns the rate the optimizer uses from
// now on (`rate` unchanged unless it is reduced). As Keras: the reduction reads the rate as the
// float32 variable holds it, reduces only when that exceeds float32(min_lr), and the new rate
// max(rate * factor, min_lr) is stored as float32. The improvement test compares float32 values
// (Keras's ops.less/ops.greater on Python floats).
double plateau_epoch_end(const ReduceLrOnPlateau& r, bool up, double current, double rate,
                         PlateauState& st);

}  // namespace nnfleet
