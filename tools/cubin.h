/* `fusec --cubin sm_90,...`: SASS for named GPUs put into the artifact, so
 * that a deployed service's first load skips the PTX JIT (docs/artifact.md,
 * "SASS sections"). The SASS comes from the CUDA toolkit's ptxas. */
#ifndef FG_CUBIN_H
#define FG_CUBIN_H
#include <stddef.h>
#include <stdio.h>

enum { FG_CUBIN_MAX = 16 };

/* Checks one --cubin architecture, "sm_NN" or "sm_NNa": returns its NN, or
 * 0 when it is not one. */
int fg_cubin_arch(const char *arch);

/* ptxas: explicit (--ptxas) when given, else $CUDA_HOME/bin/ptxas, the
 * first on PATH, /usr/local/cuda/bin/ptxas. Writes the path to buf and
 * returns it, or NULL (having said why on stderr: none found, or the
 * explicit one is not an executable). */
const char *fg_cubin_find_ptxas(const char *explicit_path, char *buf, size_t buflen);

/* Assembles ptx[0..len) (the whole artifact fusec wrote) with ptxas for
 * each of archs[0..n), the assemblers running at once, and writes one SASS
 * section for each to out, in the order given. Returns an exit status: 0,
 * or 1 after saying on stderr what failed (ptxas's own messages, a temp
 * file that could not be written). */
int fg_cubin_append(FILE *out, const char *ptxas, const char *ptx, size_t len,
                    const char *const *archs, int n);

#endif
