// nnfleet: the command-line tool. Exit codes: 0 success; 1 bad input (plan, data or model file)
// or an output folder that could not be written; 2 bad command line; 3 a model failed or none
// trained to the end; 130 interrupted (Ctrl-C / SIGTERM; resume with --resume). main() turns
// errors into 1 and 2; a finished `train` says 0, 1, 3 or 130 (leaderboard.h).
#include <malloc.h>

#include <cstdio>

#include "commands.h"
#include "nnfleet/error.h"
#include "nnfleet/version.h"
#include "zero_pages.h"

// libxsmm (linked through the kernels) allocates its registry at its first use, not at load in
// this static build: declared here, not included, as the front end sees no library header.
extern "C" void libxsmm_init(void);

int main(int argc, char** argv) {
  // Every buffer of 1 MiB or more (datasets, model arenas, file images) is mapped on its own and
  // returned to the system when freed. glibc's default threshold rises after the first large free,
  // after which such buffers come from the heap and linger there once freed: W1 on two workers
  // peaked at 162 MB resident with the default and at 150 MB with a fixed threshold (143.4 MB now,
  // at 256 KiB and at 1 MiB alike). Below 1 MiB, freed memory stays for the next model: a .keras
  // save maps and unmaps HDF5's 516 KiB metadata cache and 330 KiB buffers at 256 KiB, and their
  // page faults made W3 4-5% slower (2.26-2.34 s against 2.15-2.28 s on one worker, Zen 5). The
  // trim threshold (128 KiB when the mmap one is set) follows, or the heap's top would be handed
  // back and faulted in again after each save.
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
  // Before any thread starts: libxsmm's zero-filled registry, locked in memory (10.5 MB
  // resident; zero_pages.h).
  libxsmm_init();  // its registry made now, so that its zero pages go next
  nnfleet::cli::release_zero_pages();
  CLI::App app{
      "nnfleet: train and evaluate many small neural networks at once, one pinned worker per "
      "core.\nSee README.md for the plan format and the output folder."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nnfleet " NNFLEET_VERSION_STRING);
  nnfleet::cli::Run run;
  nnfleet::cli::add_train_command(app, run);
  nnfleet::cli::add_predict_command(app, run);
  nnfleet::cli::add_evaluate_command(app, run);
  nnfleet::cli::add_export_command(app, run);
  nnfleet::cli::add_inspect_command(app, run);
  nnfleet::cli::add_report_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run();
  } catch (const nnfleet::UsageError& e) {
    // Messages quote names from files: shown with their control characters escaped.
    std::fprintf(stderr, "nnfleet: %s\n", nnfleet::terminal_safe(e.what(), true).c_str());
    return 2;
  } catch (const nnfleet::Error& e) {
    std::fprintf(stderr, "nnfleet: %s\n", nnfleet::terminal_safe(e.what(), true).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "nnfleet: out of memory\n");
    return 1;
  }
}
