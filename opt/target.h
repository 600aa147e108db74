/* The GPU the code is generated for: every hardware fact the scheduler and
 * the backend use, in one description built from --arch (and --sm-count),
 * so that no pass keeps a literal of its own (model: tinygrad's Renderer,
 * whose fields are the device's limits). */
#ifndef FG_TARGET_H
#define FG_TARGET_H
#include <stdbool.h>
#include <stdint.h>

typedef struct fg_target {
  int arch;                  /* compute capability x 10: 80, 86, 87, 89, 90 */
  int sm_count;              /* SMs, for grids sized to fill the GPU */
  int regs_per_sm;           /* 32-bit registers an SM has */
  int threads_per_sm;        /* resident threads an SM holds */
  int static_smem_per_block; /* bytes of static shared memory a kernel may declare */
  int dyn_smem_per_block;    /* bytes of shared memory a kernel may opt in to */
  bool clusters;             /* thread-block clusters and distributed shared memory */
  int cluster_ctas_per_sm;   /* the most CTAs in clusters an SM holds at once */
  /* issue 19 (wgmma): the architecture-specific features of sm_90a
   * (`--arch sm_90a`: wgmma.mma_async, `.target sm_90a`); set by the
   * caller after fg_target_init, which describes the GPU, not the PTX */
  bool arch_specific;
  int64_t l2_bytes; /* the L2 cache (issue 17: a kernel re-reading a tensor larger than
                     * it reads in reverse order, schedule.c choose_l2_order) */
  /* What the cost model (cost.c) assumes of the memory and the launch; a
   * GPU of the same architecture may differ (--knob COST_GBS). */
  int copy_gbs;       /* device-to-device copy bandwidth, read + write, GB/s */
  int mem_latency_ns; /* a load's latency under load */
  double launch_us;   /* an empty kernel's device time, queued back to back */
  bool bf16x2_minmax; /* max/min.NaN.bf16x2 */
  bool f8_cvt;        /* issue 17: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (two f32 to two f8
                       * codes) and cvt.rn.f16x2.{e4m3x2,e5m2x2}: sm_90 with PTX ISA 7.8;
                       * sm_89 has them from PTX ISA 8.1 only (ptxas: "cvt with
                       * .e4m3x2/.e5m2x2 on sm_89 requires PTX ISA .version 8.1"), and
                       * fusec writes 7.8 for it (llvm_module.c) */
  /* issue 17: what the cost model assumes of arithmetic (cost.c,
   * fg_kernel_compute_us): f32 lanes an SM issues to a cycle, the clock
   * under load */
  int alu_lanes_per_sm;
  double clock_ghz;
} fg_target;

/* The SM count fusec sizes grids for when --sm-count is not given: the
 * H100 SXM's. An artifact for more SMs than a GPU has still runs, except
 * the kernels whose CTAs wait for one another, which the loader refuses. */
enum { FG_DEFAULT_SM_COUNT = 132, FG_MAX_SM_COUNT = 1024 };

/* The description of compute capability arch (80 for sm_80, ...), with
 * sm_count SMs (0: FG_DEFAULT_SM_COUNT). False for an architecture fusec
 * does not know. */
bool fg_target_init(fg_target *t, int arch, int sm_count);

#endif
