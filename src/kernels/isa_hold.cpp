// See isa_hold.h.
#include "kernels/isa_hold.h"

#include <libxsmm.h>
#include <oneapi/dnnl/dnnl.h>

namespace nnfleet {

bool hold_jit_kernels_to_avx2() {
  libxsmm_init();
  libxsmm_set_target_archid(LIBXSMM_X86_AVX2);
  return dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2) == dnnl_success &&
         libxsmm_get_target_archid() == LIBXSMM_X86_AVX2;
}

}  // namespace nnfleet
