// nnfleet's public C++ API, all of it: error.h (the exceptions), array.h (caller-owned arrays),
// model.h (Keras models: load, inspect, predict, save) and run.h (train a plan's fleet).
#pragma once

#include "nnfleet/array.h"
#include "nnfleet/error.h"
#include "nnfleet/model.h"
#include "nnfleet/run.h"
