/* The cost model: a kernel's estimated device time (cost.c). */
#ifndef FG_COST_H
#define FG_COST_H
#include "plan.h"

typedef struct fg_cost {
  double us;        /* estimated device time */
  double bytes;     /* bytes it moves */
  double in_flight; /* bytes its resident threads keep in flight */
  double waves;     /* CTAs / the CTAs the GPU holds at once */
} fg_cost;

/* The widest element of k's tensor parameters, bytes (1 when none). */
int fg_kernel_input_size(const fg_plan *p, const fg_kernel *k);
/* k's estimate at copy_gbs of copy bandwidth (the target's, or a knob's). */
fg_cost fg_kernel_cost(const fg_plan *p, const fg_kernel *k, double copy_gbs);

#endif
