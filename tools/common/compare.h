/* Comparing a result against the reference interpreter's (fgrun --check).
 * Floats: NaN and +-inf must sit at the same positions; over elements where
 * both are finite the relative L2 error ||got - want|| / ||want|| (in
 * double) must be within a per-dtype tolerance that absorbs libdevice's few
 * ulp and rounding differences of fused code, but catches real bugs. Ints
 * and bools must match exactly, and so must the MX formats' codes (f8e8m0
 * bytes, f4e2m1 packed bytes). */
#ifndef FG_COMPARE_H
#define FG_COMPARE_H
#include <stdio.h>

#include "interp.h"

/* The relative L2 tolerance of a float dtype (0 for ints and bool). */
double fg_compare_tol(fg_dtype dt);

/* The tolerance of result `index` of g: the loosest of the float dtypes it
 * is computed through (a reduction in f32 cast to f64 is as exact as f32;
 * ints: 0, exact). */
double fg_compare_tol_of(const fg_graph *g, int index);

/* Compares result `index`, printing one line to f, e.g.
 *   result 0 (bf16[16,128,1600]): rel_l2=1.2e-03 tol=1.0e-02 ok
 * Returns true when it passes. */
bool fg_compare(FILE *f, int index, const fg_tensor *got, const fg_tensor *want);
/* The same with the tolerance given (fg_compare_tol_of). */
bool fg_compare_tol_at(FILE *f, int index, const fg_tensor *got, const fg_tensor *want, double tol);

#endif
