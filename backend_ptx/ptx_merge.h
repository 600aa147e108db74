/* Joining the PTX of several modules compiled in parallel into one module:
 * the first keeps its header (.version/.target/.address_size), the others
 * lose theirs, and their module-scope symbols other than kernel entries
 * (libdevice helpers, constant tables) get a per-module suffix so that two
 * copies never clash. */
#ifndef FGB_PTX_MERGE_H
#define FGB_PTX_MERGE_H

/* Returns a malloc'd text (NULL on out-of-memory); texts are not freed. */
char *fgb_ptx_merge(char *const *texts, int n);

#endif
