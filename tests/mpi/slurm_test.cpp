// nnfleet as a Slurm job step, on a one-node Slurm cluster that one_node_slurm.sh makes on this
// machine for each test (Debian's munged, slurmctld and slurmd with their own key, slurm.conf,
// ports and state in the test's folder): `srun --mpi=pmix -n 2` (the ranks get their rank and
// peers from Slurm's PMIx server, no mpirun) and `salloc -n 2 mpirun` (mpirun takes its slots from
// the allocation) each give the results and weights of one process running the same plan.
// Needs root and the Slurm packages, as CI has them (scripts/setup): without them the tests fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include "mpi_test_util.h"

namespace nnfleet {
namespace {

using testing_util::TempDir;
using namespace mpi_test_util;

const std::string kSlurm = std::string(NNFLEET_SOURCE_DIR) + "/tests/mpi/one_node_slurm.sh";

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the Slurm test runs slurmctld and slurmd as root, as CI runs "
                                "it; run `make test` as root";
    // Run inside a Slurm job (a developer's allocation), srun and salloc would read its SLURM_*
    // variables (SLURM_JOB_ID, SLURM_CONF, ...) and talk to that cluster, not the test's.
    std::vector<std::string> inherited;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("SLURM_", 0) == 0)
        inherited.push_back(std::string(*e).substr(0, std::string(*e).find('=')));
    for (const std::string& name : inherited) unsetenv(name.c_str());
    cluster_ = dir.path + "/slurm";
    const std::string out = dir.path + "/slurm-up.out", err = dir.path + "/slurm-up.err";
    const int rc =
        std::system((shell_quote(kSlurm) + " up " + shell_quote(cluster_) + " " +
                     std::to_string(getpid()) + " >" + shell_quote(out) + " 2>" + shell_quote(err))
                        .c_str());
    ASSERT_EQ(rc, 0) << "could not start the one-node Slurm cluster:\n"
                     << testing_util::read_text(err);
    node_ = trimmed(testing_util::read_text(out));
    testing_util::write_blobs(dir.path, "train", 1500, 1);
    testing_util::write_blobs(dir.path, "test", 300, 2);
    plan_ = dir.path + "/plan.yaml";
    testing_util::write_text(plan_, cnn_plan(3));
  }
  void TearDown() override {
    // Also after a failure; the cluster's watcher ends it by itself should this process die.
    if (!cluster_.empty()) {
      EXPECT_EQ(std::system((shell_quote(kSlurm) + " down " + shell_quote(cluster_)).c_str()), 0);
    }
  }

  // `command...` (srun or salloc, then their arguments) as a client of the test's cluster.
  Proc start_in_slurm(std::vector<std::string> command, const std::string& tag) {
    std::vector<std::string> args = {"/usr/bin/env", "SLURM_CONF=" + cluster_ + "/slurm.conf",
                                     "NNFLEET_SLURM_DIR=" + cluster_};
#ifdef NNFLEET_SANITIZED
    // Open MPI itself leaks at exit; nnfleet's own leaks are checked by mpi_fleet_test.
    const char* asan = std::getenv("ASAN_OPTIONS");
    args.push_back(std::string("ASAN_OPTIONS=") + (asan ? asan : "") + ":detect_leaks=0");
#endif
    args.insert(args.end(), command.begin(), command.end());
    for (const std::string& a : {std::string("train"), plan_, std::string("--out"),
                                 dir.path + "/" + tag, std::string("--json")})
      args.push_back(a);
    return start(args, dir.path, tag);
  }

  // The run in `tag` equals a single process's, and its run_end event shows two ranks on this
  // node, one of which read the data.
  void expect_one_process_results(const Proc& p, const std::string& tag) {
    const Proc single = start({kTool, "train", plan_, "--out", dir.path + "/single", "--quiet"},
                              dir.path, "single");
    ASSERT_EQ(wait_for(single), 0) << testing_util::read_text(single.err);
    const std::string out = dir.path + "/" + tag;
    EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(dir.path + "/single"));
    EXPECT_TRUE(weights(out) == weights(dir.path + "/single")) << "the weights differ";
    Json end;
    for (const Json& e : events(p.out))
      if (e["event"] == "run_end") end = e;
    ASSERT_TRUE(end.is_object()) << "no run_end event in " << p.out;
    ASSERT_EQ(end["ranks"].size(), 2u) << end;
    int readers = 0, jobs = 0;
    for (const Json& r : end["ranks"]) {
      EXPECT_EQ(r["host"], node_) << r;
      readers += r["loaded_data"].get<bool>() ? 1 : 0;
      jobs += r["jobs"].get<int>();
    }
    EXPECT_EQ(readers, 1) << "the node's two ranks should share one copy of the data: " << end;
    EXPECT_EQ(jobs, 6) << end;
  }

  TempDir dir;
  std::string cluster_, node_, plan_;
};

TEST_F(Slurm, SrunWithPmixGivesTheResultsAndWeightsOfOneProcess) {
  // Two tasks on the node, unbound (the ranks share its cores out themselves).
  const Proc p =
      start_in_slurm({"srun", "--mpi=pmix", "-n", "2", "--cpu-bind=none", kTool}, "srun");
  ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
  expect_one_process_results(p, "srun");
}

TEST_F(Slurm, MpirunInsideSallocGivesTheResultsAndWeightsOfOneProcess) {
  // No -np: mpirun starts one rank per task of the allocation.
  std::vector<std::string> command = {"salloc", "-n", "2"};
  const std::vector<std::string> run = mpirun({"--bind-to", "none"}, {});
  command.insert(command.end(), run.begin(), run.end());
  const Proc p = start_in_slurm(command, "salloc");
  ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
  expect_one_process_results(p, "salloc");
}

}  // namespace
}  // namespace nnfleet
