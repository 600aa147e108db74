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
    /* CTAs in clusters of 2 resident at once (cuOccupancyMaxActiveClusters,
     * the loader's check): 1056 on the H200's 132 SMs at 9 and at 10 an SM,
     * 8 an SM (docs/benchmarks.md, runs X2 and T2) */
    t->cluster_ctas_per_sm = 8;
    break;
  default:
    return false;
  }
  t->bf16x2_minmax = arch >= 80;
  t->f8_cvt = arch >= 90;
  /* L2 from the data sheets and whitepapers: A100 40 MB, GA102 6 MB,
   * Orin 4 MB, AD102 72 MB (RTX 4090), H100 SXM and H200 50 MB. */
  t->l2_bytes = (int64_t)(arch == 90   ? 50
                          : arch == 80 ? 40
                          : arch == 86 ? 6
                          : arch == 87 ? 4
                                       : 72) *
                1000 * 1000;
  /* docs/benchmarks.md: an H100 SXM's copy 2866-2950 GB/s (runs R0-R2,
   * E9), an H200's 4107 (T1, also its empty kernel: 3.26 us); A100 and
   * the sm_86/89 parts at their data sheets' bandwidth times the H100's
   * copy / peak ratio (0.87). */
  t->copy_gbs = arch == 90 ? 2900 : arch == 80 ? 1700 : arch == 87 ? 180 : 800;
  t->mem_latency_ns = 700;
  t->launch_us = 3.0;
  /* The programming guide's arithmetic throughput table (f32 add/mul/fma
   * a cycle an SM: 64 on sm_80, 128 on sm_86/89/90) and the data sheets'
   * boost clocks, less under sustained load (H100 SXM 1.98 GHz boost,
   * 1.755 typical under load; A100 1.41). */
  t->alu_lanes_per_sm = arch == 80 ? 64 : 128;
  t->clock_ghz = arch == 90 ? 1.75 : arch == 80 ? 1.41 : 1.5;
  return true;
}
