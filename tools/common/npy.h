/* .npy files (numpy's format, versions 1.0-3.0), little-endian hosts only.
 * Dtypes: numpy's own for bool, ints, f16, f32, f64; bf16 is stored as '<u2'
 * and f8e4m3/f8e5m2/f8e8m0 as '|u1' holding raw bits, so reading those needs
 * the dtype the caller expects (the graph's signature says what the bits
 * mean). f4e2m1 is stored as its packed bytes, '|u1' with the last dim
 * halved (two elements a byte, the even one in the low nibble: the layout of
 * torch.float4_e2m1fn_x2). */
#ifndef FG_NPY_H
#define FG_NPY_H
#include <stddef.h>

#include "interp.h"

/* Parses a whole .npy image into a newly allocated tensor. `hint` resolves
 * raw-bit storage: '<u2' is read as bf16 and '|u1' as an f8 type only when
 * hint is that dtype ('|u1' is u8 otherwise); pass FG_DTYPE_INVALID for no
 * hint. fortran_order=True is transposed into C order. The tensor's dtype is
 * what the file holds: the caller checks it against what it wants. On error
 * returns false with "NAME: problem" in err; never crashes on bad bytes. */
bool fg_npy_parse(const char *name, const void *buf, size_t len, fg_dtype hint, fg_tensor *t,
                  char *err, size_t errcap);
/* Reads the file at path (same rules). */
bool fg_npy_read(const char *path, fg_dtype hint, fg_tensor *t, char *err, size_t errcap);
/* Writes t as a version 1.0 .npy file (through a temporary file renamed into
 * place, so a failure leaves no partial file). */
bool fg_npy_write(const char *path, const fg_tensor *t, char *err, size_t errcap);
/* The descr string stored for a dtype ('<f4', '<u2' for bf16, ...). */
const char *fg_npy_descr(fg_dtype dt);

#endif
