// libFuzzer harness: a plan (YAML, or JSON which is YAML too) through load_plan (YAML parsing,
// alias and nesting limits, field checks, grid expansion, every layer built once through the
// registry) and, when it loads, plan_to_yaml.
#include "core/check.h"
#include "fuzz_input.h"
#include "plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nnfleet::fuzz::InputFile file("plan.yaml");
  try {
    const nnfleet::Plan plan = nnfleet::load_plan(file.write(data, size));
    nnfleet::plan_to_yaml(plan);
  } catch (const nnfleet::Error&) {
  }
  return 0;
}
