// ReduceLROnPlateau's epoch-end rule against Keras 3's on_epoch_end written out in numpy
// (float32 learning-rate variable, float32 comparisons), and the monitor directions.
#include "fleet/fit/lr_plateau.h"

#include <gtest/gtest.h>

#include <vector>

namespace nnfleet {
namespace {

TEST(LrPlateau, ReducesAtTheEpochsKerasDoes) {
  // tools-free reference: Keras's loop run in numpy 1.24 on these values (rate 0.1, factor 0.5,
  // patience 2, min_delta 1e-4, cooldown 1, min_lr 0.03) gave the rate logged at each epoch.
  const std::vector<double> values = {1.0, 0.9, 0.95, 0.92, 0.91, 0.5, 0.50005,
                                      0.6, 0.6, 0.6,  0.6,  0.6,  0.6, 0.6};
  const std::vector<double> logged = {
      0.10000000149011612,  0.10000000149011612,  0.10000000149011612,  0.10000000149011612,
      0.05000000074505806,  0.05000000074505806,  0.05000000074505806,  0.05000000074505806,
      0.029999999329447746, 0.029999999329447746, 0.029999999329447746, 0.029999999329447746,
      0.029999999329447746, 0.029999999329447746};
  ReduceLrOnPlateau r;
  r.factor = 0.5;
  r.patience = 2;
  r.cooldown = 1;
  r.min_lr = 0.03;
  PlateauState st;
  double rate = 0.1;
  for (size_t e = 0; e < values.size(); ++e) {
    EXPECT_EQ(static_cast<float>(rate), static_cast<float>(logged[e])) << "epoch " << e;
    rate = plateau_epoch_end(r, false, values[e], rate, st);
  }
  EXPECT_EQ(rate, 0.029999999329447746);  // reduced rates are float32 values, as Keras holds
  // At min_lr no reduction happens and wait keeps counting (Keras): from epoch 8 (the first after
  // the cooldown) to 13.
  EXPECT_EQ(st.wait, 6);
}

TEST(LrPlateau, MaxModeAndMinDelta) {
  ReduceLrOnPlateau r;
  r.patience = 1;
  r.min_delta = 0.05;
  r.mode = "max";
  PlateauState st;
  double rate = 0.01;
  rate = plateau_epoch_end(r, true, 0.5, rate, st);
  EXPECT_EQ(rate, 0.01);
  rate = plateau_epoch_end(r, true, 0.54, rate, st);  // up by less than min_delta: no better
  EXPECT_EQ(rate, static_cast<double>(static_cast<float>(static_cast<float>(0.01) * 0.1)));
  EXPECT_EQ(st.best, 0.5);
  rate = plateau_epoch_end(r, true, 0.56, rate, st);  // better than 0.5 + 0.05
  EXPECT_EQ(st.best, 0.56);
}

TEST(LrPlateau, MonitorDirectionsFollowKeras) {
  EXPECT_FALSE(monitor_goes_up("val_loss", "auto"));
  EXPECT_FALSE(monitor_goes_up("loss", "auto"));
  EXPECT_TRUE(monitor_goes_up("val_accuracy", "auto"));
  EXPECT_TRUE(monitor_goes_up("sparse_categorical_accuracy", "auto"));
  EXPECT_FALSE(monitor_goes_up("val_mae", "auto"));
  EXPECT_FALSE(monitor_goes_up("mape", "auto"));
  EXPECT_TRUE(monitor_goes_up("val_loss", "max"));
  EXPECT_FALSE(monitor_goes_up("val_accuracy", "min"));
}

}  // namespace
}  // namespace nnfleet
