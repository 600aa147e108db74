/* .npy reading and writing. The header is a Python dict literal; we parse
 * only what numpy writes ('descr', 'fortran_order', 'shape') with a small,
 * bounds-checked scanner so that malformed files give errors, not crashes. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fail(char *err, size_t cap, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(char *err, size_t cap, const char *name, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (err && cap)
    snprintf(err, cap, "%s: %s", name, msg);
  return false;
}

const char *fg_npy_descr(fg_dtype dt) {
  switch (dt) {
  case FG_BOOL:
    return "|b1";
  case FG_I8:
    return "|i1";
  case FG_U8:
    return "|u1";
  case FG_I16:
    return "<i2";
  case FG_I32:
    return "<i4";
  case FG_I64:
    return "<i8";
  case FG_F16:
    return "<f2";
  case FG_BF16:
    return "<u2";
  case FG_F32:
    return "<f4";
  case FG_F64:
    return "<f8";
  case FG_F8E4M3:
  case FG_F8E5M2:
  case FG_F8E8M0:
  case FG_F4E2M1: /* the packed bytes, the last dim halved */
    return "|u1";
  default:
    return NULL;
  }
}

/* ---- header scanning: p..end is the dict text ---- */

typedef struct scan {
  const char *p, *end;
} scan;

static void skip_ws(scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static bool eat(scan *s, char c) {
  skip_ws(s);
  if (s->p < s->end && *s->p == c) {
    s->p++;
    return true;
  }
  return false;
}

/* A quoted string (' or "), copied into out. */
static bool read_str(scan *s, char *out, size_t cap) {
  skip_ws(s);
  if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
    return false;
  char q = *s->p++;
  size_t n = 0;
  while (s->p < s->end && *s->p != q) {
    if (n + 1 >= cap)
      return false;
    out[n++] = *s->p++;
  }
  if (s->p >= s->end)
    return false;
  s->p++;
  out[n] = 0;
  return true;
}

static bool read_word(scan *s, const char *w) {
  skip_ws(s);
  size_t n = strlen(w);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
    return false;
  s->p += n;
  return true;
}

typedef struct header {
  char descr[16];
  bool fortran, have_descr, have_fortran, have_shape;
  int rank;
  int64_t shape[FG_MAX_RANK];
} header;

static bool read_shape(scan *s, header *h, const char *name, char *err, size_t cap) {
  if (!eat(s, '('))
    return fail(err, cap, name, "malformed header: shape is not a tuple");
  h->rank = 0;
  for (;;) {
    if (eat(s, ')'))
      return true;
    skip_ws(s);
    if (s->p >= s->end || *s->p < '0' || *s->p > '9')
      return fail(err, cap, name, "malformed header: bad shape entry");
    int64_t v = 0;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
      if (v > (INT64_MAX - 9) / 10)
        return fail(err, cap, name, "shape entry is too large");
      v = v * 10 + (*s->p++ - '0');
    }
    if (s->p < s->end && *s->p == 'L')
      s->p++; /* Python 2 longs */
    if (h->rank == FG_MAX_RANK)
      return fail(err, cap, name, "rank above %d is not supported", FG_MAX_RANK);
    h->shape[h->rank++] = v;
    if (!eat(s, ',')) {
      if (eat(s, ')'))
        return true;
      return fail(err, cap, name, "malformed header: bad shape tuple");
    }
  }
}

static bool parse_header(const char *txt, size_t len, header *h, const char *name, char *err,
                         size_t cap) {
  scan s = {txt, txt + len};
  memset(h, 0, sizeof *h);
  if (!eat(&s, '{'))
    return fail(err, cap, name, "malformed header: not a dict");
  for (;;) {
    if (eat(&s, '}'))
      break;
    char key[32];
    if (!read_str(&s, key, sizeof key) || !eat(&s, ':'))
      return fail(err, cap, name, "malformed header: expected a key");
    if (strcmp(key, "descr") == 0) {
      if (!read_str(&s, h->descr, sizeof h->descr))
        return fail(err, cap, name,
                    "malformed header: descr must be a simple dtype string (structured dtypes are "
                    "not supported)");
      h->have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (read_word(&s, "True"))
        h->fortran = true;
      else if (read_word(&s, "False"))
        h->fortran = false;
      else
        return fail(err, cap, name, "malformed header: fortran_order must be True or False");
      h->have_fortran = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!read_shape(&s, h, name, err, cap))
        return false;
      h->have_shape = true;
    } else {
      return fail(err, cap, name, "malformed header: unknown key '%s'", key);
    }
    if (!eat(&s, ',')) {
      if (eat(&s, '}'))
        break;
      return fail(err, cap, name, "malformed header: expected ',' or '}'");
    }
  }
  if (!h->have_descr || !h->have_fortran || !h->have_shape)
    return fail(err, cap, name, "malformed header: needs descr, fortran_order and shape");
  return true;
}

/* Maps a descr to a dtype; '<u2' and '|u1' depend on the hint. */
static bool descr_dtype(const char *d, fg_dtype hint, fg_dtype *out, const char *name, char *err,
                        size_t cap) {
  char order = d[0];
  const char *code = d + 1;
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return fail(err, cap, name, "unsupported dtype '%s'", d);
  static const struct {
    const char *code;
    fg_dtype dt;
  } map[] = {
      {"b1", FG_BOOL}, {"i1", FG_I8},  {"u1", FG_U8},  {"i2", FG_I16}, {"i4", FG_I32},
      {"i8", FG_I64},  {"f2", FG_F16}, {"f4", FG_F32}, {"f8", FG_F64}, {"u2", FG_BF16},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (strcmp(code, map[i].code) != 0)
      continue;
    fg_dtype dt = map[i].dt;
    bool one_byte = fg_dtype_size(dt) == 1;
    if (order == '>' && !one_byte)
      return fail(err, cap, name, "big-endian data ('%s') is not supported; save it little-endian",
                  d);
    if (dt == FG_BF16 && hint != FG_BF16)
      return fail(err, cap, name,
                  "uint16 data ('%s') is only read as bf16 bits, but %s is expected", d,
                  hint == FG_DTYPE_INVALID ? "no dtype" : fg_dtype_name(hint));
    if (dt == FG_U8 && (fg_dtype_is_f8(hint) || fg_dtype_is_mx(hint)))
      dt = hint;
    *out = dt;
    return true;
  }
  return fail(err, cap, name, "unsupported dtype '%s'", d);
}

static uint32_t rd_le(const unsigned char *p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Fortran order: element (i0..ik) is at sum i_d * prod_{e<d} size_e. */
static void from_fortran(fg_tensor *t, const unsigned char *src) {
  int es = fg_dtype_size(t->dtype);
  int64_t fst[FG_MAX_RANK], idx[FG_MAX_RANK] = {0}, s = 1;
  for (int d = 0; d < t->rank; d++) {
    fst[d] = s;
    s *= t->sizes[d];
  }
  int64_t n = fg_tensor_numel(t), off = 0;
  for (int64_t i = 0; i < n; i++) {
    memcpy((char *)t->data + i * es, src + off * es, (size_t)es);
    for (int d = t->rank - 1; d >= 0; d--) {
      off += fst[d];
      if (++idx[d] < t->sizes[d])
        break;
      off -= fst[d] * t->sizes[d];
      idx[d] = 0;
    }
  }
}

bool fg_npy_parse(const char *name, const void *buf, size_t len, fg_dtype hint, fg_tensor *t,
                  char *err, size_t errcap) {
  const unsigned char *b = buf;
  memset(t, 0, sizeof *t);
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
    return fail(err, errcap, name, "not a .npy file (bad magic)");
  int major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = rd_le(b + 8, 2);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12)
      return fail(err, errcap, name, "truncated header");
    hlen = rd_le(b + 8, 4);
    hstart = 12;
  } else {
    return fail(err, errcap, name, "unsupported .npy version %d.%d", major, b[7]);
  }
  if (hlen > len - hstart)
    return fail(err, errcap, name, "truncated header");
  header h;
  if (!parse_header((const char *)b + hstart, hlen, &h, name, err, errcap))
    return false;
  fg_dtype dt = FG_DTYPE_INVALID;
  if (!descr_dtype(h.descr, hint, &dt, name, err, errcap))
    return false;
  int64_t numel = 1;
  for (int d = 0; d < h.rank; d++) {
    if (h.shape[d] && numel > INT64_MAX / 16 / h.shape[d])
      return fail(err, errcap, name, "shape is too large");
    numel *= h.shape[d];
  }
  size_t data_off = hstart + hlen;
  uint64_t need = (uint64_t)numel * (uint64_t)fg_dtype_size(dt);
  if (need != len - data_off)
    return fail(err, errcap, name, "holds %zu data bytes but its shape and dtype need %llu",
                len - data_off, (unsigned long long)need);
  if (fg_dtype_is_packed(dt)) { /* bytes of two elements: the last dim counts bytes */
    if (h.rank == 0 || (h.fortran && h.rank > 1))
      return fail(err, errcap, name,
                  "f4e2m1 data must be a C-order uint8 array of at least one dim (two elements "
                  "a byte along the last dim)");
    h.shape[h.rank - 1] *= 2;
  }
  if (!fg_tensor_alloc(t, dt, h.rank, h.shape))
    return fail(err, errcap, name, "out of memory");
  if (h.fortran && h.rank > 1)
    from_fortran(t, b + data_off);
  else
    memcpy(t->data, b + data_off, t->nbytes);
  if (dt == FG_BOOL) /* numpy bools are 0/1, but be safe with other bytes */
    for (size_t i = 0; i < t->nbytes; i++)
      ((unsigned char *)t->data)[i] = ((unsigned char *)t->data)[i] != 0;
  return true;
}

bool fg_npy_read(const char *path, fg_dtype hint, fg_tensor *t, char *err, size_t errcap) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(err, errcap, path, "cannot open: %s", strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return fail(err, errcap, path, "out of memory");
      }
      buf = nb;
    }
    size_t r = fread(buf + len, 1, cap - len, f);
    len += r;
    if (r == 0)
      break;
  }
  bool io_err = ferror(f);
  fclose(f);
  bool ok = !io_err && fg_npy_parse(path, buf, len, hint, t, err, errcap);
  if (io_err)
    fail(err, errcap, path, "read error");
  free(buf);
  return ok;
}

bool fg_npy_write(const char *path, const fg_tensor *t, char *err, size_t errcap) {
  const char *descr = fg_npy_descr(t->dtype);
  if (!descr)
    return fail(err, errcap, path, "cannot store dtype %d", (int)t->dtype);
  if (fg_dtype_is_packed(t->dtype) && (t->rank == 0 || t->sizes[t->rank - 1] % 2))
    return fail(err, errcap, path, "f4e2m1 needs an even last dim to be stored as bytes");
  char shape[FG_MAX_RANK * 24 + 8];
  int n = snprintf(shape, sizeof shape, "(");
  for (int d = 0; d < t->rank; d++)
    n += snprintf(shape + n, sizeof shape - (size_t)n, "%lld%s",
                  (long long)(fg_dtype_is_packed(t->dtype) && d == t->rank - 1 ? t->sizes[d] / 2
                                                                               : t->sizes[d]),
                  t->rank == 1      ? ","
                  : d + 1 < t->rank ? ", "
                                    : "");
  snprintf(shape + n, sizeof shape - (size_t)n, ")");
  char hdr[512];
  int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                    descr, shape);
  /* Pad with spaces so the data starts at a multiple of 64, ending in '\n'. */
  int total = 10 + hl + 1;
  int pad = (64 - total % 64) % 64;
  memset(hdr + hl, ' ', (size_t)pad);
  hl += pad;
  hdr[hl++] = '\n';
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 8);
  if (!tmp)
    return fail(err, errcap, path, "out of memory");
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp", 5);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fail(err, errcap, path, "cannot create: %s", strerror(errno));
    free(tmp);
    return false;
  }
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
            (t->nbytes == 0 || fwrite(t->data, 1, t->nbytes, f) == t->nbytes);
  ok = (fclose(f) == 0) && ok;
  if (ok && rename(tmp, path) != 0)
    ok = false;
  if (!ok) {
    remove(tmp);
    fail(err, errcap, path, "write failed: %s", strerror(errno));
  }
  free(tmp);
  return ok;
}
