/* Sizes that are affine expressions of one symbolic size (issues 18 and
 * 20): what a slice, a pad, a cat or a reshape along a symbolic dim gives
 * (`T-1`, `T+16`, `2*T`), and what an attribute may write where a graph is
 * symbolic (docs/format.md 3.2.1). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

fg_dim fg_dim_affine(const char *sym, int64_t mul, int64_t off) {
  fg_dim d = {0};
  if (!sym || mul == 0) {
    d.size = off;
    return d;
  }
  d.size = -1;
  d.sym = sym;
  d.mul = mul == 1 ? 0 : mul;
  d.off = off;
  return d;
}

int64_t fg_dim_mul(fg_dim d) { return !d.sym ? 0 : d.mul ? d.mul : 1; }

int64_t fg_dim_off(fg_dim d) { return d.sym ? d.off : d.size; }

bool fg_dim_add(fg_dim a, fg_dim b, fg_dim *out) {
  if (a.sym && b.sym && strcmp(a.sym, b.sym) != 0)
    return false;
  int64_t m, o;
  if (__builtin_add_overflow(fg_dim_mul(a), fg_dim_mul(b), &m) ||
      __builtin_add_overflow(fg_dim_off(a), fg_dim_off(b), &o))
    return false;
  *out = fg_dim_affine(a.sym ? a.sym : b.sym, m, o);
  return true;
}

bool fg_dim_scale(fg_dim a, int64_t k, fg_dim *out) {
  int64_t m, o;
  if (__builtin_mul_overflow(fg_dim_mul(a), k, &m) || __builtin_mul_overflow(fg_dim_off(a), k, &o))
    return false;
  *out = fg_dim_affine(a.sym, m, o);
  return true;
}

bool fg_dim_eval(fg_dim d, int64_t v, int64_t *out) {
  int64_t p;
  if (!d.sym) {
    *out = d.size;
    return true;
  }
  return !__builtin_mul_overflow(fg_dim_mul(d), v, &p) && !__builtin_add_overflow(p, d.off, out);
}

char *fg_dim_str(fg_dim d, char *buf, int cap) {
  if (!d.sym) {
    snprintf(buf, (size_t)cap, "%" PRId64, d.size);
    return buf;
  }
  int64_t m = fg_dim_mul(d);
  int n = m == 1 ? snprintf(buf, (size_t)cap, "%s", d.sym)
                 : snprintf(buf, (size_t)cap, "%" PRId64 "*%s", m, d.sym);
  if (d.off && n >= 0 && n < cap)
    snprintf(buf + n, (size_t)(cap - n), "%s%" PRId64, d.off > 0 ? "+" : "", d.off);
  return buf;
}

fg_dim fg_attr_dim(const fg_attr *a, int i) {
  if (a->syms && a->syms[i].sym)
    return a->syms[i];
  return fg_dim_affine(NULL, 0, a->ints[i]);
}

bool fg_attr_has_sym(const fg_attr *a) {
  if (!a || a->kind != FG_ATTR_INTS || !a->syms)
    return false;
  for (int i = 0; i < a->n; i++)
    if (a->syms[i].sym)
      return true;
  return false;
}
