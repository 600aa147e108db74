/* A short human-readable summary of a tensor (fgrun without --out). */
#ifndef FG_SUMMARY_H
#define FG_SUMMARY_H
#include <stdio.h>

#include "interp.h"

/* Prints e.g.
 *   result 0: f32[2,3] = [0, 1, 2, ... 5] min=0 max=5 mean=2.5
 * with up to 6 leading values and the last one; min/max/mean skip NaN and
 * report how many NaNs there were. */
void fg_print_summary(FILE *f, int index, const fg_tensor *t);

#endif
