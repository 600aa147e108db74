/* In-place results (opt/inplace.c): how a result written into a
 * parameter's storage is written, and the proof that it races with no
 * read. */
#ifndef FG_INPLACE_H
#define FG_INPLACE_H
#include "plan.h"

const char *fg_inplace_mode_name(fg_inplace_mode m);
/* Rewrites g's in-place results that need a writer of their own (the
 * result is a parameter other than its target, a view of parameters, or
 * another result too) into copies (contiguous), and those staged[i] marks
 * (may be NULL) into copies of a temp (contiguous(segment_set(v))),
 * appended at the end of the graph. */
bool fg_inplace_prepare(fg_graph *g, const char *const *staged, fg_diag *d);
/* Decides each in-place result of a built plan (fg_result_plan.into,
 * .inplace). True when every one is unchanged or provably safe. Else
 * marks the results to stage in staged[] (the reason: why not direct) and
 * returns false, or, when
 * `final` or a staged result still fails, reports an error (and returns
 * false). */
bool fg_inplace_decide(fg_plan *p, const char **staged, bool final, fg_diag *d);

#endif
