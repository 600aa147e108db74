/* Symbolic sizes in the code generator (issue 18, first step).
 *
 * A graph whose parameters carry one symbolic size T as their leading dim
 * (`x: bf16[T, 4096]`: tokens, batch x sequence) is compiled as the static
 * graph with T bound to a *placeholder*: a prime no static dim of the graph
 * is a multiple of, so every extent that involves T is a multiple of it and
 * nothing else is. The passes and the scheduler see static shapes; the
 * placeholder must never reach the code or the plan as a number.
 * fg_sym_check proves that it cannot: T stays the leading dim of every
 * value that has it (so strides, which are products of the dims after the
 * first, never involve it, and the leading coordinate is a quotient, never
 * a remainder), no kernel reduces over it, and every kernel over it is a
 * pointwise kernel (bounds: T x the rest, a kernel argument) or a row kernel
 * with a CTA a row (its grid). What the plan states in terms of T (sizes,
 * temps, grids) is written as formulas of T (docs/artifact.md), evaluated
 * by the loader at each run. */
#ifndef FG_SYMBOLIC_H
#define FG_SYMBOLIC_H
#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "ir.h"

typedef struct fg_sym_lowering {
  int n;                 /* 0 (static graph) or 1 */
  const char *name;      /* T */
  int64_t placeholder;   /* what the passes and the scheduler see for T */
  int64_t min, max, div; /* what the graph declares about T */
  /* Sizes that are expressions of T (issues 18 and 20: T-1, T+16, 2*T,
   * slices and pads along T): extents are then a*T + b, which the
   * placeholder turns into a*P + b. It is a prime near 2^38, and the graph's
   * offsets (|b| times the static dims) and static extents are limited to
   * 2^31 elements, so each such number is read back exactly by rounding to
   * the nearest multiple of P (fg_sym_split). Otherwise (affine false) the
   * placeholder is a prime near 10^6 and only multiples of it involve T. */
  bool affine;
} fg_sym_lowering;

/* The graph with its symbolic size bound to the placeholder (a copy in a new
 * arena; g itself when it has no symbolic size; NULL after an error in d: more
 * than one symbolic size, or one that is not the leading dim). */
fg_graph *fg_sym_lower(fg_graph *g, fg_sym_lowering *out, fg_diag *d);

/* The extent as a*T + b: a = 0 and b = extent when it does not involve T. */
void fg_sym_split(const fg_sym_lowering *s, int64_t extent, int64_t *a, int64_t *b);
/* Whether the extent is a multiple of m for every value of T the facts
 * admit (a multiple of T's divisor). */
bool fg_sym_multiple(const fg_sym_lowering *s, int64_t extent, int64_t m);
/* An extent at T's largest declared value (extent itself when it does not
 * involve T): what 32- or 64-bit indexing is decided on. */
int64_t fg_sym_at_max(const fg_sym_lowering *s, int64_t extent);
/* Whether the extent involves T (a != 0 in fg_sym_split). */
bool fg_sym_involves(const fg_sym_lowering *s, int64_t extent);
/* The extent as a plan formula: "T", "T*4096", "T*64-64" or "4096" (in a). */
const char *fg_sym_formula(const fg_sym_lowering *s, int64_t extent, fg_arena *a);

/* After segmentation and scheduling: refuses (an error in d at the node) what
 * the placeholder cannot stand for, so that it never reaches the code. */
struct fg_plan;
/* The values' part, before scheduling (T the leading dim of every value
 * that has it, no op along T that the code generator lacks), so that a
 * value with T inside is refused for that, not by a grid check of its
 * stand-in size; fg_sym_check, after scheduling, the kernels' part. */
bool fg_sym_check_values(const struct fg_plan *p, fg_diag *d);
bool fg_sym_check(const struct fg_plan *p, fg_diag *d);

#endif
