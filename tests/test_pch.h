// Precompiled once (nnfleet_test_pch) and reused by every test executable (NNFLEET_PCH): the
// third-party and standard headers the tests include. Never an nnfleet header, so that editing
// one does not rebuild this.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>
