// Arrays a caller holds in memory (a C++ program's buffers, NumPy arrays), named in a plan's data
// sources in place of file paths: `{x: "memory:x", y: "memory:y"}`. They are read in place,
// never copied: an Array viewing the caller's bytes.
//
// The names are bound for the duration of a MemoryArrays::Scope on the calling thread only, so
// runs on different threads may use the same names for different arrays. Everything that reads
// a plan's sources (loading, the run folder's hashes) runs on the thread that called run_fleet.
#pragma once

#include <map>
#include <string>

#include "data/dataset.h"

namespace nnfleet {

inline constexpr const char* kMemoryArrayPrefix = "memory:";

// Whether `name` names a memory array ("memory:..."), not a file.
bool is_memory_array(const std::string& name);

class MemoryArrays {
 public:
  // Binds `arrays` (by full name, "memory:x") on this thread until the scope ends; a scope
  // opened inside another replaces it and restores it at its end. The arrays' bytes must stay
  // valid and unchanged while the scope lives. Not copyable.
  class Scope {
   public:
    explicit Scope(const std::map<std::string, Array>& arrays);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const std::map<std::string, Array>* previous_;
  };

  // The array bound to `name` on this thread. Throws DataError when none is.
  static const Array& get(const std::string& name);
};

}  // namespace nnfleet
