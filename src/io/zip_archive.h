// The zip archive reader and writer live in platform/zip_archive.h; this name stays while the
// CLI (src/cli/model_run.cpp, being rewritten) still includes it.
#pragma once

#include "platform/zip_archive.h"
