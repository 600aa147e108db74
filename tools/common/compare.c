#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Relative L2 tolerances. f32: libdevice's transcendentals are within a
 * few ulp of the correctly rounded values the interpreter computes, and a
 * 60-op chain compounds that to ~1e-5 (measured on the H100); 1e-4 keeps a
 * margin while any real bug (a wrong op, index or rounding) is ~1e-3 or
 * more. */
double fg_compare_tol(fg_dtype dt) {
  switch (dt) {
  case FG_F64:
    return 1e-9;
  case FG_F32:
    return 1e-4;
  case FG_F16:
    return 1e-3;
  case FG_BF16:
    return 1e-2;
  case FG_F8E4M3:
    return 6e-2;
  case FG_F8E5M2:
    return 1.2e-1;
  case FG_F8E8M0:
  case FG_F4E2M1:
    return 0; /* compared exactly, code for code */
  default:
    return 0;
  }
}

/* The loosest tolerance over the values result `index` is computed from:
 * an f32 sum cast to f64 carries the f32 sum's rounding, not f64's. */
static double cone_tol(const fg_value *v, unsigned char *seen) {
  if (!v->def || seen[v->def->id])
    return 0;
  seen[v->def->id] = 1;
  double tol = 0;
  for (int i = 0; i < v->def->nout; i++)
    tol = fmax(tol, fg_compare_tol(v->def->out[i]->type.dtype));
  for (int i = 0; i < v->def->nin; i++)
    tol = fmax(tol, cone_tol(v->def->in[i], seen));
  return tol;
}

double fg_compare_tol_of(const fg_graph *g, int index) {
  const fg_value *r = g->results[index];
  double tol = fg_compare_tol(r->type.dtype);
  if (!fg_dtype_is_float(r->type.dtype))
    return tol;
  unsigned char *seen = calloc((size_t)g->next_node_id + 1, 1);
  if (!seen)
    return tol;
  tol = fmax(tol, cone_tol(r, seen));
  free(seen);
  return tol;
}

static void type_str(const fg_tensor *t, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s[", fg_dtype_name(t->dtype));
  for (int d = 0; d < t->rank && n > 0 && (size_t)n < cap; d++)
    n += snprintf(buf + n, cap - (size_t)n, "%s%lld", d ? "," : "", (long long)t->sizes[d]);
  if (n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, "]");
}

/* Class of a float for the exact-position check: finite, NaN, +inf, -inf. */
static int fclass(double v) { return isnan(v) ? 1 : isinf(v) ? (v > 0 ? 2 : 3) : 0; }

/* The storage bytes of two tensors of one dtype and shape, compared
 * exactly (f4e2m1: both nibbles of each byte; an odd element count leaves
 * no padding nibble: the innermost dim is even). */
static bool exact_bits(FILE *f, int index, const char *ts, const fg_tensor *got,
                       const fg_tensor *want) {
  size_t nb = (size_t)fg_dtype_nbytes(want->dtype, fg_tensor_numel(want)), bad = 0, first = 0;
  const unsigned char *g = got->data, *w = want->data;
  for (size_t i = 0; i < nb; i++)
    if (g[i] != w[i] && bad++ == 0)
      first = i;
  if (bad)
    fprintf(f,
            "result %d (%s): %zu of %zu bytes differ (first at byte %zu: got 0x%02x, want "
            "0x%02x) FAIL\n",
            index, ts, bad, nb, first, g[first], w[first]);
  else
    fprintf(f, "result %d (%s): exact ok\n", index, ts);
  return bad == 0;
}

bool fg_compare(FILE *f, int index, const fg_tensor *got, const fg_tensor *want) {
  return fg_compare_tol_at(f, index, got, want, fg_compare_tol(want->dtype));
}

bool fg_compare_tol_at(FILE *f, int index, const fg_tensor *got, const fg_tensor *want,
                       double tol) {
  char ts[160];
  type_str(want, ts, sizeof ts);
  bool same_shape = got->rank == want->rank;
  for (int d = 0; same_shape && d < got->rank; d++)
    same_shape = got->sizes[d] == want->sizes[d];
  if (got->dtype != want->dtype || !same_shape) {
    char gs[160];
    type_str(got, gs, sizeof gs);
    fprintf(f, "result %d (%s): got %s FAIL\n", index, ts, gs);
    return false;
  }
  int64_t n = fg_tensor_numel(want);
  if (fg_dtype_is_mx(want->dtype)) /* MX formats: the codes (packed bytes) exactly */
    return exact_bits(f, index, ts, got, want);
  if (!fg_dtype_is_float(want->dtype)) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
      if (fg_tensor_get_i(got, i) != fg_tensor_get_i(want, i)) {
        if (first < 0)
          first = i;
        bad++;
      }
    if (bad)
      fprintf(f, "result %d (%s): %lld of %lld differ (first at %lld: got %lld, want %lld) FAIL\n",
              index, ts, (long long)bad, (long long)n, (long long)first,
              (long long)fg_tensor_get_i(got, first), (long long)fg_tensor_get_i(want, first));
    else
      fprintf(f, "result %d (%s): exact ok\n", index, ts);
    return bad == 0;
  }
  double num = 0, den = 0;
  int64_t special_bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    double a = fg_tensor_get_f(got, i), b = fg_tensor_get_f(want, i);
    int ca = fclass(a), cb = fclass(b);
    if (ca != cb) {
      if (first < 0)
        first = i;
      special_bad++;
      continue;
    }
    if (ca)
      continue;
    num += (a - b) * (a - b);
    den += b * b;
  }
  /* An all-zero reference: fall back to the absolute error. */
  double rel = den > 0 ? sqrt(num) / sqrt(den) : sqrt(num);
  bool ok = special_bad == 0 && rel <= tol;
  fprintf(f, "result %d (%s): rel_l2=%.1e tol=%.1e", index, ts, rel, tol);
  if (special_bad)
    fprintf(f, " nan/inf positions differ at %lld elements (first at %lld: got %g, want %g)",
            (long long)special_bad, (long long)first, fg_tensor_get_f(got, first),
            fg_tensor_get_f(want, first));
  fprintf(f, " %s\n", ok ? "ok" : "FAIL");
  return ok;
}
