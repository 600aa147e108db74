/* The cost model: a kernel's estimated device time (cost.c). */
#ifndef FG_COST_H
#define FG_COST_H
#include "plan.h"

typedef struct fg_cost {
  double us;        /* estimated device time */
  double bytes;     /* bytes it moves */
  double l2_bytes;  /* ... of which expected to be read from L2, not DRAM (issue 17) */
  double in_flight; /* bytes its resident threads keep in flight */
  double waves;     /* CTAs / the CTAs the GPU holds at once */
} fg_cost;

/* The widest element of k's tensor parameters, bytes (1 when none). */
int fg_kernel_input_size(const fg_plan *p, const fg_kernel *k);
/* The widest element a pointwise kernel's lanes load in vectors (along
 * the last dim: operands indexed by the domain's last extent; flat: those
 * of the domain's size), or 0 (none; or knob PW_FLAT_DENSE 0). */
int fg_pointwise_vector_size(const fg_plan *p, const fg_kernel *k, bool flat);
/* k's estimate at copy_gbs of copy bandwidth (the target's, or a knob's). */
/* The bytes buffer b moves once in a kernel (a parameter read only by
 * gathers: the rows they read). */
double fg_plan_arg_bytes(const fg_plan *p, fg_buf_ref b);
fg_cost fg_kernel_cost(const fg_plan *p, const fg_kernel *k, double copy_gbs);

/* issue 17, the arithmetic term: thread instructions an element of k's
 * domain takes (each op over the whole domain k computes rather than
 * loads, once: 1, divisions and square roots 4, libdevice's functions 16), and the time the GPU's
 * f32 lanes take for them over the whole domain (us). */
double fg_kernel_ops_per_element(const fg_plan *p, const fg_kernel *k);
double fg_kernel_compute_us(const fg_plan *p, const fg_kernel *k);
/* Whether k's arithmetic takes at least half the time its bytes take at
 * the target's copy bandwidth: it needs every thread slot, not only the
 * bytes in flight (schedule_column). */
bool fg_kernel_compute_heavy(const fg_plan *p, const fg_kernel *k);

/* issue 17, flat vectors: integer instructions an element of pointwise
 * kernel k spends on its coordinates, and k's estimate with its arithmetic
 * (launch, then the longer of the memory term and its instructions, the
 * index arithmetic's included, at the target's lanes). */
double fg_pointwise_index_ops(const fg_kernel *k);
double fg_pointwise_us(const fg_plan *p, const fg_kernel *k);

#endif
