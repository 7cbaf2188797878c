// Precompiled for every nnfleet library with more than two sources (NNFLEET_PCH): the headers
// nearly every file includes. nlohmann/json comes in through core/config.h and alone takes
// about 3 s to parse per file. Only third-party and standard headers belong here, never ours,
// so that editing an nnfleet header does not rebuild the precompiled header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
