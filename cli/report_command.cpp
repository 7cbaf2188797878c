// `nnfleet report RUN_DIR`: writes RUN_DIR/report.html, the self-contained HTML report of a run
// (src/report/report.h), from the files in the run folder.
#include <cstdio>

#include "commands.h"
#include "nnfleet/run.h"

namespace nnfleet::cli {
namespace {

struct ReportArgs {
  std::string dir;
  bool live = false;
  std::string group_by;
};

int run_report(const ReportArgs& a) {
  const std::string path = api::write_report(a.dir, a.live, a.group_by);
  std::printf("report: %s\n", path.c_str());
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* c = app.add_subcommand(
      "report",
      "Write RUN_DIR/report.html: leaderboard, learning curves, grid and search charts, per-core "
      "timeline "
      "and layer tables of a run, in one self-contained page that opens offline");
  c->add_option("run_dir", args->dir, "The output folder of a run (train --out)")->required();
  c->add_flag("--live", args->live,
              "Write the page as for a run still going: models without a record show as "
              "pending or running, and the page reloads itself every few seconds");
  c->add_option("--group-by", args->group_by,
                "Group the models by this recorded parameter (a grid variable, search parameter "
                "or `parameters:` key) in the page's per-group view: each group's ranking and "
                "which architecture wins it; overrides the plan's `group_by`")
      ->type_name("NAME");
  c->callback([&run, args] { run = [args] { return run_report(*args); }; });
}

}  // namespace nnfleet::cli
