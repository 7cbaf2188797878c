// The thread's bound memory arrays (memory_arrays.h).
#include "data/memory_arrays.h"

#include "core/check.h"

namespace nnfleet {
namespace {

thread_local const std::map<std::string, Array>* t_arrays = nullptr;

}  // namespace

bool is_memory_array(const std::string& name) { return name.rfind(kMemoryArrayPrefix, 0) == 0; }

MemoryArrays::Scope::Scope(const std::map<std::string, Array>& arrays) : previous_(t_arrays) {
  t_arrays = &arrays;
}

MemoryArrays::Scope::~Scope() { t_arrays = previous_; }

const Array& MemoryArrays::get(const std::string& name) {
  if (t_arrays) {
    const auto it = t_arrays->find(name);
    if (it != t_arrays->end()) return it->second;
  }
  std::string bound;
  if (t_arrays)
    for (const auto& [k, v] : *t_arrays) bound += (bound.empty() ? "" : ", ") + k;
  throw DataError("failed to read data '" + name +
                  "': no array of that name was given; expected one of: " +
                  (bound.empty() ? std::string("(none)") : bound));
}

}  // namespace nnfleet
