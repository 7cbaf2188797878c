// nnfleet's public C++ API, all of it: error.h (the exceptions), array.h (caller-owned arrays),
// data.h (data files in and out), model.h (Keras models: load, inspect, predict, save), run.h
// (train a plan's fleet, its report), search.h (a search's draws), cluster.h (a run across MPI
// ranks) and version.h (generated).
// testing.h holds hooks for the tests of front ends and is not included here.
#pragma once

#include "nnfleet/array.h"
#include "nnfleet/cluster.h"
#include "nnfleet/data.h"
#include "nnfleet/error.h"
#include "nnfleet/model.h"
#include "nnfleet/run.h"
#include "nnfleet/search.h"
#include "nnfleet/version.h"
