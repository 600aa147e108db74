/* Hardware facts of the architectures fusec generates code for (target.h).
 * From NVIDIA's CUDA C++ Programming Guide, "Technical Specifications per
 * Compute Capability". */
#include "target.h"

bool fg_target_init(fg_target *t, int arch, int sm_count) {
  *t = (fg_target){0};
  t->arch = arch;
  t->sm_count = sm_count > 0 ? sm_count : FG_DEFAULT_SM_COUNT;
  t->regs_per_sm = 65536;
  t->static_smem_per_block = 48 * 1024;
  switch (arch) {
  case 80:
  case 87:
    t->threads_per_sm = 2048;
    t->dyn_smem_per_block = 163 * 1024;
    break;
  case 86:
  case 89:
    t->threads_per_sm = 1536;
    t->dyn_smem_per_block = 99 * 1024;
    break;
  case 90:
    t->threads_per_sm = 2048;
    t->dyn_smem_per_block = 227 * 1024;
    t->clusters = true;
    break;
  default:
    return false;
  }
  t->bf16x2_minmax = arch >= 80;
  return true;
}
