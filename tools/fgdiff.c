/* fgdiff: the random-graph differential tester (docs/testing.md).
 *
 *   fgdiff [--seed S] [--count N] [--out DIR] [--no-backend] [--verbose] [--large]
 *          [--symbolic]
 *   (--large: graphs at realistic sizes, only written to --out, for
 *   bench/perf_fuzz.py; no checks. --symbolic: graphs over a symbolic
 *   leading size T, below)
 *   fgdiff --check FILE.fg          one file through the same checks
 *   fgdiff --minimize FILE.fg       shrink a failing file, print the result
 *
 * Each seed makes one valid graph as .fg text over the op table: params of
 * random dtypes and broadcast-compatible shapes, then statements drawn from
 * every op kind (pointwise ops from the table with generated attributes,
 * casts among all dtypes, reductions over any dim subset with keepdim,
 * views and their chains, cat / split / slice / pad, literals and scalar
 * parameters), and several results, some of them aliases of parameters or
 * views of them. A statement is kept only if the frontend accepts it (the
 * frontend's inference gives its type); the rejections are counted, so the
 * generator needs no shape rules of its own and covers new ops by itself.
 *
 * Checks, each graph in a child process (a crash is a finding, not the end
 * of the run): the interpreter on seeded inputs before any pass, then after
 * every pass of the pipeline, bitwise equal (NaN equals NaN); segmentation
 * and scheduling; the PTX backend (fgc_compile). A check that fails, an
 * exit 3 (internal error) or a crash is a finding; a graph the code
 * generator refuses with a located error is counted by its message.
 * --out DIR writes every graph as DIR/gN.fg and its artifact DIR/gN.ptx, so
 * the GPU can compare the artifact with the interpreter (fgrun --check,
 * tests/gpu/device_run.sh difftest). Exit 0 when nothing was found.
 *
 * --symbolic: the leading dim b0 of p0 (and of the params that share it)
 * becomes the symbolic size T, with a random size clause that admits b0
 * (or none). Each statement is parsed twice, with static sizes and over T,
 * and kept only when both parse and agree (the types over T are the static
 * ones with T for b0); the graph is written over T, after a comment line
 * that gives b0. The passes run on the graph as written (as fusec --emit
 * opt), the interpreter on it bound (fg_graph_specialize) to b0, to the
 * smallest size the facts admit and to an odd multiple of the divisor.
 * The artifact of a symbolic graph must not hold a multiple of the
 * stand-in its size was compiled with (opt/symbolic.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"
#include "compile.h"
#include "diag.h"
#include "exit_status.h"
#include "infer.h"
#include "inputs.h"
#include "interp.h"
#include "op.h"
#include "parse.h"
#include "passes.h"
#include "plan.h"
#include "symbolic.h"

/* ---- a portable PRNG (splitmix64) ---- */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next_u64(rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int pick(rng *r, int n) { return n <= 1 ? 0 : (int)(next_u64(r) % (uint64_t)n); }
static bool chance(rng *r, int percent) { return pick(r, 100) < percent; }

/* ---- text buffers ---- */

typedef struct buf {
  char *s;
  size_t n, cap;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0)
      return;
    if (b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + (size_t)k + 1)
      cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s)
      abort(); /* a test tool: out of memory ends the run */
    b->s = s;
    b->cap = cap;
  }
}

/* ---- the generator ---- */

enum { MAX_VALS = 64, MAX_PARAMS = 4 };

typedef struct val {
  char name[16];
  fg_type type; /* in the static graph */
  bool param;
  unsigned tdims; /* --symbolic: the dims that are T in the symbolic graph (bit k: dim k) */
} val;

typedef struct gen {
  rng r;
  buf params; /* "x0: f32[4,8], ..." */
  buf body;   /* accepted statements */
  val vals[MAX_VALS];
  int nvals, next_id;
  int rejected; /* statements the frontend refused */
  bool large;   /* parameters of 2^22 to 2^26 elements (--large, performance fuzzing) */
  /* --symbolic: every statement is also parsed with the parameters'
   * leading dim b0 written as the symbolic size T, and kept only if the
   * frontend takes it there with the static types (T for b0) */
  bool sym;
  int64_t b0;
  buf sparams;     /* "x0: f32[T,8], ..." */
  int sym_refused; /* statements taken with static sizes, refused over T */
  int sym_differs; /* taken over T with types other than the static ones */
} gen;

static const fg_dtype float_dts[] = {FG_F32, FG_F32, FG_F32, FG_BF16, FG_F16, FG_F64};
static const fg_dtype all_dts[] = {FG_F32, FG_BF16, FG_F16, FG_F64,  FG_I32,    FG_I64,
                                   FG_I8,  FG_U8,   FG_I16, FG_BOOL, FG_F8E4M3, FG_F8E5M2};
static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, 33, 64, 128};

/* t as .fg text; the dims in tdims (bit k: dim k) written as T. */
static void type_text(buf *b, const fg_type *t, unsigned tdims) {
  bprintf(b, "%s", fg_dtype_name(t->dtype));
  if (t->scalar)
    return;
  bprintf(b, "[");
  for (int i = 0; i < t->rank; i++)
    if (tdims >> i & 1)
      bprintf(b, "%sT", i ? "," : "");
    else
      bprintf(b, "%s%" PRId64, i ? "," : "", t->dims[i].size);
  bprintf(b, "]");
}

/* Parses params + body + extra + "return ret" silently; returns the module. */
static fg_module *try_parse(const char *params, const char *body, const char *extra,
                            const char *ret) {
  buf t = {0};
  bprintf(&t, "graph g(%s) {\n%s%s  return %s\n}\n", params ? params : "", body ? body : "", extra,
          ret);
  fg_diag d;
  fg_diag_init(&d, "gen.fg", t.s, t.n, NULL);
  fg_module *m = fg_parse("gen.fg", t.s, t.n, &d);
  fg_diag_free(&d);
  free(t.s);
  return m;
}

/* Whether the symbolic type st is the static type t with T for b0; the
 * dims that are T go to *tdims. */
static bool same_but_t(const fg_type *t, const fg_type *st, int64_t b0, unsigned *tdims) {
  *tdims = 0;
  if (t->dtype != st->dtype || t->scalar != st->scalar || t->rank != st->rank)
    return false;
  for (int k = 0; k < t->rank; k++) {
    if (!st->dims[k].sym) {
      if (st->dims[k].size != t->dims[k].size)
        return false;
    } else if (strcmp(st->dims[k].sym, "T") != 0 || t->dims[k].size != b0) {
      return false;
    } else {
      *tdims |= 1u << k;
    }
  }
  return true;
}

/* With --symbolic: whether the frontend takes the same statements over T
 * with the static graph's types (fills tdims for the n results). */
static bool symbolic_agrees(gen *g, const fg_graph *sg, const char *extra, const char *ret, int n,
                            unsigned *tdims) {
  fg_module *m = try_parse(g->sparams.s, g->body.s, extra, ret);
  bool ok = m && m->ngraphs == 1 && m->graphs[0]->nresults == n;
  if (!ok)
    g->sym_refused++;
  for (int i = 0; ok && i < n; i++)
    if (!same_but_t(&sg->results[i]->type, &m->graphs[0]->results[i]->type, g->b0, &tdims[i])) {
      g->sym_differs++;
      ok = false;
    }
  if (m)
    fg_module_free(m);
  return ok;
}

/* Adds "  NAMES = CALL\n" if the frontend accepts it; the new values' types
 * come from the frontend's inference. */
static bool add_stmt(gen *g, int nout, const char *call) {
  if (g->nvals + nout > MAX_VALS)
    return false;
  char names[4][16];
  buf st = {0}, ret = {0};
  bprintf(&st, "  ");
  for (int i = 0; i < nout; i++) {
    snprintf(names[i], sizeof names[i], "v%d", g->next_id + i);
    bprintf(&st, "%s%s", i ? ", " : "", names[i]);
    bprintf(&ret, "%s%s", i ? ", " : "", names[i]);
  }
  bprintf(&st, " = %s\n", call);
  fg_module *m = try_parse(g->params.s, g->body.s, st.s, ret.s);
  bool ok = m && m->ngraphs == 1 && m->graphs[0]->nresults == nout;
  unsigned tdims[4] = {0};
  if (!ok)
    g->rejected++;
  else if (g->sym)
    ok = symbolic_agrees(g, m->graphs[0], st.s, ret.s, nout, tdims);
  if (ok) {
    for (int i = 0; i < nout; i++) {
      val *v = &g->vals[g->nvals++];
      snprintf(v->name, sizeof v->name, "%s", names[i]);
      v->type = m->graphs[0]->results[i]->type;
      v->param = false;
      v->tdims = tdims[i];
    }
    g->next_id += nout;
    bprintf(&g->body, "%s", st.s);
  }
  if (m)
    fg_module_free(m);
  free(st.s);
  free(ret.s);
  return ok;
}

/* A value, the recent ones more often; tensors only when tensor is set. */
static const val *any_val(gen *g, bool tensor) {
  for (int tries = 0; tries < 16; tries++) {
    int n = g->nvals;
    int i = chance(&g->r, 60) ? n - 1 - pick(&g->r, n < 4 ? n : 4) : pick(&g->r, n);
    if (!tensor || !g->vals[i].type.scalar)
      return &g->vals[i];
  }
  for (int i = g->nvals - 1; i >= 0; i--)
    if (!g->vals[i].type.scalar)
      return &g->vals[i];
  return NULL;
}

static void literal(gen *g, buf *b, fg_dtype hint) {
  static const char *const floats[] = {"0.0",  "-0.0", "1.0",  "-1.0", "0.5",     "2.0",  "3.0",
                                       "1e-5", "inf",  "-inf", "nan",  "65504.0", "1e30", "0.1"};
  static const char *const ints[] = {"0", "1", "-1", "2", "3", "7", "127", "-128"};
  if (fg_dtype_is_float(hint) ? chance(&g->r, 85) : chance(&g->r, 25))
    bprintf(b, "%s", floats[pick(&g->r, (int)(sizeof floats / sizeof *floats))]);
  else if (hint == FG_BOOL && chance(&g->r, 50))
    bprintf(b, "%s", chance(&g->r, 50) ? "true" : "false");
  else
    bprintf(b, "%s", ints[pick(&g->r, (int)(sizeof ints / sizeof *ints))]);
}

/* An operand for a binary op with x: another value (same shape, or one that
 * broadcasts), a literal, or x itself. */
static void operand(gen *g, buf *b, const val *x) {
  int k = pick(&g->r, 10);
  if (k < 3) {
    literal(g, b, x->type.dtype);
    return;
  }
  if (k < 4) {
    bprintf(b, "%s", x->name);
    return;
  }
  const val *y = any_val(g, false);
  bprintf(b, "%s", y ? y->name : x->name);
}

/* Random attributes of a pointwise op, from its table row. */
static void pw_attrs(gen *g, buf *b, const fg_op *op) {
  for (int i = 0; i < op->nattrs; i++) {
    const fg_attr_spec *a = &op->attrs[i];
    if (!a->required && !chance(&g->r, 40))
      continue;
    bprintf(b, ", %s=", a->name);
    switch (a->type) {
    case FG_AT_FLOAT:
    case FG_AT_SCALAR:
      literal(g, b, FG_F32);
      break;
    case FG_AT_INT:
      bprintf(b, "%d", pick(&g->r, 5) - 2);
      break;
    case FG_AT_BOOL:
      bprintf(b, "%s", chance(&g->r, 50) ? "true" : "false");
      break;
    case FG_AT_DTYPE:
      bprintf(b, "%s",
              fg_dtype_name(all_dts[pick(&g->r, (int)(sizeof all_dts / sizeof *all_dts))]));
      break;
    case FG_AT_STRING: {
      int n = 0;
      while (a->choices && a->choices[n])
        n++;
      bprintf(b, "\"%s\"", n ? a->choices[pick(&g->r, n)] : "x");
      break;
    }
    case FG_AT_INTS:
      bprintf(b, "[0]");
      break;
    }
  }
}

static void dim_list(buf *b, const int64_t *v, int n) {
  bprintf(b, "[");
  for (int i = 0; i < n; i++)
    bprintf(b, "%s%" PRId64, i ? "," : "", v[i]);
  bprintf(b, "]");
}

/* --symbolic: whether this statement keeps x's dim T where the code
 * generator takes it (the leading dim), most of the time; *tk is T's dim. Draws nothing
 * for values without T, so static graphs stay as they were. */
static bool keep_t(gen *g, const val *x, int *tk) {
  if (!x->tdims || !chance(&g->r, 70))
    return false;
  *tk = __builtin_ctz(x->tdims);
  return true;
}

/* One statement; false when nothing was added (the caller tries again). */
static bool gen_stmt(gen *g) {
  const val *x = any_val(g, true);
  if (!x)
    return false;
  const fg_type *t = &x->type;
  int r = t->rank;
  buf c = {0};
  int nout = 1, k = pick(&g->r, 100), tk = 0;
  if (k < 30) { /* a pointwise op from the table */
    const fg_op *op;
    do
      op = &fg_ops[pick(&g->r, FG_OP_COUNT)];
    while (op->kind != FG_KIND_POINTWISE || op->code == FG_OP_CAST);
    bprintf(&c, "%s(%s", op->name, x->name);
    for (int i = 1; i < op->min_in; i++) {
      bprintf(&c, ", ");
      if (op->code == FG_OP_WHERE && i == 1) { /* where(cond, a, b): x as a */
        buf cond = {0};
        bprintf(&cond, "gt(%s, ", x->name);
        literal(g, &cond, t->dtype);
        bprintf(&cond, ")");
        free(c.s);
        c = (buf){0};
        bprintf(&c, "where(%s, %s", cond.s, x->name);
        free(cond.s);
        continue;
      }
      operand(g, &c, x);
    }
    pw_attrs(g, &c, op);
    bprintf(&c, ")");
  } else if (k < 42) { /* cast among all dtypes */
    fg_dtype to = all_dts[pick(&g->r, (int)(sizeof all_dts / sizeof *all_dts))];
    bprintf(&c, "cast(%s, dtype=%s)", x->name, fg_dtype_name(to));
  } else if (k < 60 && r > 0 && chance(&g->r, 25)) { /* issue 20's composites along one dim */
    static const char *const comps[] = {"softmax", "log_softmax", "logsumexp", "argmax",
                                        "argmin",  "cumsum",      "stack"};
    const char *op = comps[pick(&g->r, 7)];
    int d = pick(&g->r, r);
    int64_t dm = chance(&g->r, 20) ? d - r : d;
    if (!strcmp(op, "logsumexp")) {
      bprintf(&c, "logsumexp(%s, dims=", x->name);
      dim_list(&c, &dm, 1);
    } else if (!strcmp(op, "stack")) {
      bprintf(&c, "stack(%s, %s, dim=%d", x->name, x->name, pick(&g->r, r + 1));
    } else {
      bprintf(&c, "%s(%s, dim=%" PRId64, op, x->name, dm);
    }
    if ((!strcmp(op, "logsumexp") || op[0] == 'a') && chance(&g->r, 50))
      bprintf(&c, ", keepdim=true");
    bprintf(&c, ")");
  } else if (k < 60 && r > 0) { /* a reduction over a dim subset */
    static const char *const reds[] = {"sum",  "sum",  "amax", "amin",
                                       "mean", "prod", "var",  "var_mean"};
    const char *op = reds[pick(&g->r, 8)];
    int64_t dims[FG_MAX_RANK];
    int nd = 0;
    for (int i = 0; i < r; i++)
      if (chance(&g->r, 50))
        dims[nd++] = chance(&g->r, 20) ? i - r : i;
    if (nd == 0)
      dims[nd++] = pick(&g->r, r);
    bprintf(&c, "%s(%s, dims=", op, x->name);
    dim_list(&c, dims, nd);
    if (chance(&g->r, 50))
      bprintf(&c, ", keepdim=true");
    if (op[0] == 'v' && chance(&g->r, 50))
      bprintf(&c, ", correction=%d", pick(&g->r, 2));
    bprintf(&c, ")");
    if (!strcmp(op, "var_mean"))
      nout = 2;
  } else if (k < 78 && r > 0) {                 /* a view */
    int64_t v[2 * FG_MAX_RANK], w[FG_MAX_RANK]; /* v: pad takes two amounts a dim */
    switch (pick(&g->r, 8)) {
    case 0: { /* permute */
      for (int i = 0; i < r; i++)
        v[i] = i;
      for (int i = r - 1; i > 0; i--) {
        int j = pick(&g->r, i + 1);
        int64_t tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
      }
      if (keep_t(g, x, &tk)) /* T stays in place */
        for (int i = 0; i < r; i++)
          if (v[i] == tk) {
            v[i] = v[tk];
            v[tk] = tk;
          }
      bprintf(&c, "permute(%s, dims=", x->name);
      dim_list(&c, v, r);
      bprintf(&c, ")");
      break;
    }
    case 1:                    /* transpose */
      if (keep_t(g, x, &tk)) { /* two dims other than T (or T with itself) */
        int a = pick(&g->r, r), b = pick(&g->r, r);
        a = a == tk ? (a + 1) % r : a;
        b = b == tk ? (b + 1) % r : b;
        bprintf(&c, "transpose(%s, dim0=%d, dim1=%d)", x->name, a, b);
        break;
      }
      bprintf(&c, "transpose(%s, dim0=%d, dim1=%d)", x->name, pick(&g->r, r),
              pick(&g->r, r) - (chance(&g->r, 30) ? r : 0));
      break;
    case 2: { /* reshape: merge two adjacent dims, split one, or flatten (-1) */
      int n = 0, at = pick(&g->r, r), tpos = -1; /* tpos: where T stays (-1 there) */
      int mode = pick(&g->r, 3);
      if (keep_t(g, x, &tk)) { /* merge or split dims after T */
        mode = mode == 2 ? pick(&g->r, 2) : mode;
        at = at <= tk && tk + 1 < r ? tk + 1 + pick(&g->r, r - tk - 1) : at;
      }
      for (int i = 0; i < r; i++) {
        int64_t s = t->dims[i].size;
        if (mode == 0 && i == at && i + 1 < r) {
          v[n++] = s * t->dims[i + 1].size;
          i++;
        } else if (mode == 1 && i == at && s % 2 == 0 && n + 2 <= FG_MAX_RANK) {
          v[n++] = 2;
          v[n++] = s / 2;
        } else {
          tpos = x->tdims >> i & 1 ? n : tpos;
          v[n++] = s;
        }
      }
      if (mode == 2) {
        n = 1;
        v[0] = -1;
      } else if (chance(&g->r, 20))
        v[tpos >= 0 ? tpos : pick(&g->r, n)] = -1;
      else if (tpos >= 0)
        v[tpos] = -1;
      bprintf(&c, "%s(%s, shape=", chance(&g->r, 80) ? "reshape" : "view", x->name);
      dim_list(&c, v, n);
      bprintf(&c, ")");
      break;
    }
    case 3:                    /* unsqueeze */
      if (keep_t(g, x, &tk)) { /* after T */
        bprintf(&c, "unsqueeze(%s, dim=%d)", x->name, tk + 1 + pick(&g->r, r - tk));
        break;
      }
      bprintf(&c, "unsqueeze(%s, dim=%d)", x->name,
              pick(&g->r, r + 1) - (chance(&g->r, 20) ? r + 1 : 0));
      break;
    case 4: { /* squeeze the size-1 dims (some of them) */
      int n = 0;
      for (int i = 0; i < r; i++)
        if (t->dims[i].size == 1 && chance(&g->r, 70))
          v[n++] = i;
      if (n == 0)
        v[n++] = pick(&g->r, r);
      bprintf(&c, "squeeze(%s, dims=", x->name);
      dim_list(&c, v, n);
      bprintf(&c, ")");
      break;
    }
    case 5: { /* expand the size-1 dims, maybe with a new leading dim */
      int n = 0;
      if (chance(&g->r, 30) && r < FG_MAX_RANK)
        v[n++] = sizes[pick(&g->r, 6)];
      for (int i = 0; i < r; i++) {
        int64_t s = t->dims[i].size;
        v[n++] = s == 1 ? sizes[pick(&g->r, 8)] : chance(&g->r, 15) || (x->tdims >> i & 1) ? -1 : s;
      }
      bprintf(&c, "expand(%s, shape=", x->name);
      dim_list(&c, v, n);
      bprintf(&c, ")");
      break;
    }
    case 6: { /* slice: starts, ends, steps per dim (negative and clamped bounds too) */
      int64_t st[FG_MAX_RANK];
      for (int i = 0; i < r; i++) {
        int64_t s = t->dims[i].size;
        v[i] = pick(&g->r, (int)s + 1) - (chance(&g->r, 15) ? s : 0);
        w[i] = chance(&g->r, 20) ? s + 5 : pick(&g->r, (int)s + 1);
        st[i] = 1 + (chance(&g->r, 25) ? pick(&g->r, 3) : 0);
      }
      bprintf(&c, "slice(%s, starts=", x->name);
      dim_list(&c, v, r);
      bprintf(&c, ", ends=");
      dim_list(&c, w, r);
      if (chance(&g->r, 50)) {
        bprintf(&c, ", steps=");
        dim_list(&c, st, r);
      }
      bprintf(&c, ")");
      break;
    }
    default: {                        /* pad, negative amounts crop */
      for (int i = 0; i < 2 * r; i++) /* none along T */
        v[i] = (x->tdims >> i / 2 & 1) ? 0 : pick(&g->r, 4) - (chance(&g->r, 20) ? 1 : 0);
      bprintf(&c, "pad(%s, pad=", x->name);
      dim_list(&c, v, 2 * r);
      if (chance(&g->r, 50)) {
        bprintf(&c, ", value=");
        literal(g, &c, t->dtype);
      }
      bprintf(&c, ")");
      break;
    }
    }
  } else if (k < 86 && r > 0) { /* cat with a same-shaped value, or split */
    int d = pick(&g->r, r);
    if ((x->tdims >> d & 1) && r > 1) /* not along T */
      d = (d + 1) % r;
    int64_t s = t->dims[d].size;
    if (chance(&g->r, 60)) {
      const val *y = any_val(g, true);
      bprintf(&c, "cat(%s, %s, dim=%d)", x->name, y && chance(&g->r, 50) ? y->name : x->name,
              d - (chance(&g->r, 20) ? r : 0));
    } else if (s >= 2) {
      int64_t a = 1 + pick(&g->r, (int)s - 1);
      bprintf(&c, "split(%s, sizes=[%" PRId64 ",%" PRId64 "], dim=%d)", x->name, a, s - a, d);
      nout = 2;
    } else {
      bprintf(&c, "segment_set(%s)", x->name);
    }
  } else if (k < 90) { /* creation */
    if (chance(&g->r, 50) || r == 0) {
      bprintf(&c, "add(%s, full(shape=", x->name);
      int64_t v[FG_MAX_RANK];
      for (int i = 0; i < r; i++) /* 1 along T: full's shape is static */
        v[i] = chance(&g->r, 50) || (x->tdims >> i & 1) ? 1 : t->dims[i].size;
      dim_list(&c, v, r);
      bprintf(&c, ", value=");
      literal(g, &c, t->dtype);
      bprintf(&c, ", dtype=%s))", fg_dtype_name(t->dtype));
    } else {
      bprintf(&c, "add(%s, cast(iota(%" PRId64 ", dtype=i64), dtype=%s))", x->name,
              t->dims[r - 1].size, fg_dtype_name(t->dtype == FG_BOOL ? FG_I32 : t->dtype));
    }
  } else { /* a binary op with another value: broadcasting */
    static const char *const bin[] = {"add", "sub", "mul", "div", "maximum", "minimum", "where"};
    const char *op = bin[pick(&g->r, 7)];
    const val *y = any_val(g, false);
    if (!strcmp(op, "where"))
      bprintf(&c, "where(lt(%s, %s), %s, %s)", x->name, y->name, y->name, x->name);
    else
      bprintf(&c, "%s(%s, %s)", op, x->name, y->name);
  }
  bool ok = c.s && add_stmt(g, nout, c.s);
  free(c.s);
  return ok;
}

static void gen_params(gen *g) {
  int np = 1 + pick(&g->r, 3);
  int rank = pick(&g->r, 4);
  if (rank == 0 && chance(&g->r, 70))
    rank = 2;
  if (g->sym && rank == 0) /* a leading dim for T */
    rank = 2;
  int64_t base[FG_MAX_RANK];
  for (int i = 0; i < rank; i++)
    base[i] = sizes[pick(&g->r, (int)(sizeof sizes / sizeof *sizes))];
  if (g->large) { /* realistic sizes: model dims, then the last doubled up to 4M elements */
    static const int64_t big[] = {1, 8, 32, 96, 128, 768, 1024, 2048, 4096, 8192};
    if (rank == 0)
      rank = 2;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
      base[i] = big[pick(&g->r, (int)(sizeof big / sizeof *big))];
      n *= base[i];
    }
    for (int i = rank - 1; n < ((int64_t)1 << 22); i = i ? i - 1 : rank - 1) {
      n *= 2;
      base[i] *= 2;
    }
    while (n > ((int64_t)1 << 26)) { /* at most 64M elements: halve the largest dim */
      int m = 0;
      for (int i = 1; i < rank; i++)
        m = base[i] > base[m] ? i : m;
      n /= 2;
      base[m] /= 2;
    }
  }
  if (g->sym) { /* b0 becomes T: not 1, which broadcasts */
    if (base[0] == 1)
      base[0] = sizes[1 + pick(&g->r, (int)(sizeof sizes / sizeof *sizes) - 1)];
    g->b0 = base[0];
  }
  for (int p = 0; p < np; p++) {
    val *v = &g->vals[g->nvals++];
    snprintf(v->name, sizeof v->name, "p%d", p);
    v->param = true;
    memset(&v->type, 0, sizeof v->type);
    v->type.dtype = chance(&g->r, 75)
                        ? float_dts[pick(&g->r, 6)]
                        : all_dts[pick(&g->r, 10)]; /* not f8: it needs a cast first */
    if (p > 0 && chance(&g->r, 15)) {
      v->type.scalar = true; /* a scalar parameter */
    } else {
      /* p0's shape; later ones broadcast against it (size-1 dims, fewer leading dims) */
      int drop = p > 0 && rank > 0 && chance(&g->r, 30) ? 1 : 0;
      v->type.rank = rank - drop;
      for (int i = 0; i < v->type.rank; i++) {
        int64_t s = base[i + drop];
        v->type.dims[i].size = p > 0 && chance(&g->r, 25) ? 1 : s;
      }
      /* --symbolic: the params whose leading dim is p0's carry T there */
      v->tdims = g->sym && drop == 0 && v->type.rank > 0 && v->type.dims[0].size == g->b0;
    }
    if (p)
      bprintf(&g->params, ", ");
    bprintf(&g->params, "%s: ", v->name);
    type_text(&g->params, &v->type, 0);
    if (g->sym) {
      bprintf(&g->sparams, "%s%s: ", p ? ", " : "", v->name);
      type_text(&g->sparams, &v->type, v->tdims);
    }
  }
}

/* --symbolic: the size clause, random facts about T that admit b0 (none
 * a time in four: the defaults). */
static void size_clause(gen *g, buf *b) {
  if (chance(&g->r, 25))
    return;
  int64_t div = 1, lo = 1, hi = FG_SYM_DEFAULT_MAX;
  if (chance(&g->r, 60)) { /* a power of two that divides b0, or b0 */
    int64_t ds[16];
    int n = 0;
    for (int64_t d = 2; d <= g->b0 && n < 15; d *= 2)
      if (g->b0 % d == 0)
        ds[n++] = d;
    if (n == 0 || chance(&g->r, 25))
      ds[n++] = g->b0;
    div = ds[pick(&g->r, n)];
  }
  bool range = chance(&g->r, 75);
  if (range) {
    static const int64_t los[] = {1, 1, 1, 1, 0, 2, -1, -2}; /* -1: div, -2: b0 */
    static const int64_t his[] = {-2, 4096, 65536, 1 << 20, FG_SYM_DEFAULT_MAX, (int64_t)1 << 40};
    lo = los[pick(&g->r, 8)];
    lo = lo == -1 ? div : lo == -2 ? g->b0 : lo;
    hi = his[pick(&g->r, 6)];
    hi = hi == -2 || hi < g->b0 ? g->b0 : hi;
  }
  bprintf(b, "<T");
  if (range || div > 1)
    bprintf(b, ":");
  if (range)
    bprintf(b, " %" PRId64 "..%" PRId64, lo, hi);
  if (div > 1)
    bprintf(b, " %%%" PRId64, div);
  bprintf(b, ">");
}

/* Whether the graph with these results parses (with --symbolic: over T
 * too). */
static bool results_parse(gen *g, const char *ret) {
  fg_module *m = try_parse(g->params.s, g->body.s, "", ret);
  bool ok = m != NULL;
  if (m)
    fg_module_free(m);
  if (ok && g->sym) {
    m = try_parse(g->sparams.s, g->body.s, "", ret);
    ok = m != NULL;
    if (m)
      fg_module_free(m);
  }
  return ok;
}

typedef struct gen_counts {
  long rejected;    /* statements the frontend refused */
  long sym_refused; /* --symbolic: statements refused over T only */
  long sym_differs; /* --symbolic: inferred over T other than with static sizes */
} gen_counts;

/* The whole graph's text, named name; with sym, over the symbolic size T
 * (a comment line first says T's value in the static graph). */
static char *gen_graph(uint64_t seed, const char *name, bool large, bool sym, gen_counts *counts) {
  gen g;
  memset(&g, 0, sizeof g);
  g.large = large;
  g.sym = sym;
  g.r.s = seed * 0x2545f4914f6cdd1dull + 1;
  gen_params(&g);
  int want = 2 + pick(&g.r, 12);
  for (int tries = 0; tries < 4 * want && g.nvals < MAX_VALS - 4 && g.next_id < want; tries++)
    gen_stmt(&g);
  /* results: recent values, sometimes a parameter (an alias) or a view of one */
  buf ret = {0};
  int nr = 1 + pick(&g.r, 3);
  for (int i = 0; i < nr; i++) {
    const val *v = chance(&g.r, 10) ? &g.vals[0] : any_val(&g, false);
    bprintf(&ret, "%s%s", i ? ", " : "", v->name);
  }
  if (chance(&g.r, 10) && g.vals[0].type.rank >= 2) {
    if (!sym) /* over T, a transpose of T's dim is refused by the code generator */
      bprintf(&ret, ", transpose(%s, dim0=0, dim1=1)", g.vals[0].name);
    else if (g.vals[0].type.rank >= 3)
      bprintf(&ret, ", transpose(%s, dim0=-2, dim1=-1)", g.vals[0].name);
  }
  if (!results_parse(&g, ret.s)) { /* the extra view of a parameter was refused: plain results */
    free(ret.s);
    ret = (buf){0};
    bprintf(&ret, "%s", g.vals[g.nvals - 1].name);
  }
  buf t = {0};
  if (sym) {
    bprintf(&t, "# fgdiff --symbolic: T = %" PRId64 " in the static graph\ngraph %s", g.b0, name);
    size_clause(&g, &t);
  } else {
    bprintf(&t, "graph %s", name);
  }
  bprintf(&t, "(%s) {\n%s  return %s\n}\n", sym ? g.sparams.s : g.params.s,
          g.body.s ? g.body.s : "", ret.s);
  counts->rejected += g.rejected;
  counts->sym_refused += g.sym_refused;
  counts->sym_differs += g.sym_differs;
  free(g.params.s);
  free(g.sparams.s);
  free(g.body.s);
  free(ret.s);
  return t.s;
}

/* ---- the checks ---- */

typedef enum finding {
  FD_OK,
  FD_REFUSED,       /* the code generator refused it with a located error (counted, not a bug) */
  FD_PARSE,         /* the generator wrote something the frontend refuses: a generator bug */
  FD_INTERP,        /* the interpreter failed on the original graph */
  FD_BIND,          /* a symbolic graph refused a size its facts admit (fg_graph_specialize) */
  FD_PASS_ERROR,    /* a pass failed or left the graph unverifiable */
  FD_PASS_MISMATCH, /* a pass changed a result */
  FD_INTERNAL,      /* exit 3 from segmentation, scheduling or the backend */
  FD_STAND_IN,      /* the artifact of a symbolic graph holds a multiple of its stand-in */
  FD_CRASH,         /* the child died */
  FD_COUNT
} finding;
static const char *const finding_names[FD_COUNT] = {
    "ok",         "refused",       "generator", "interp",   "bind",
    "pass-error", "pass-mismatch", "internal",  "stand-in", "crash"};

/* Bitwise equal, NaN equal to NaN and, where zeros_equal, +0.0 to -0.0. */
static bool same_bits(const fg_tensor *a, const fg_tensor *b, bool zeros_equal) {
  if (a->dtype != b->dtype || a->rank != b->rank)
    return false;
  int64_t n = fg_tensor_numel(a);
  if (n != fg_tensor_numel(b))
    return false;
  for (int64_t i = 0; i < n; i++) {
    if (fg_dtype_is_float(a->dtype)) {
      double x = fg_tensor_get_f(a, i), y = fg_tensor_get_f(b, i);
      if ((isnan(x) && isnan(y)) || (zeros_equal && x == 0 && y == 0))
        continue;
      if (memcmp(&x, &y, sizeof x) != 0)
        return false;
    } else if (fg_tensor_get_i(a, i) != fg_tensor_get_i(b, i)) {
      return false;
    }
  }
  return true;
}

/* Passes that may reassociate float arithmetic: decompose (mean and var as
 * sums: the interpreter's var has its own summation) and reduce-reuse (a
 * reduction summed from another's partial results). Their results are
 * compared as fgrun --check compares (NaN and inf at the same places, the
 * relative L2 error within the dtype's tolerance); every other pass must
 * leave each result bitwise equal. */
static bool reassociates(const char *pass) {
  return !strcmp(pass, "decompose") || !strcmp(pass, "reduce-reuse");
}

/* onehot (opt/onehot.c) may give -0.0 where the sum it replaces gave +0.0
 * (a one-hot sum of +0.0 and -0.0); otherwise bitwise. */
static bool signs_zeros(const char *pass) { return !strcmp(pass, "onehot"); }

typedef struct options {
  bool backend;
  bool verbose;
  const char *out_dir;
  bool large;    /* --large: realistic sizes, graphs written to --out only (no checks) */
  bool symbolic; /* --symbolic: graphs over a symbolic leading size T */
} options;

/* ---- the interpreter across the passes ---- */

enum {
  MAX_IO = 64,         /* parameters and results of a graph the interpreter checks */
  MAX_SYMS = 8,        /* symbolic sizes of a graph the interpreter checks */
  MAX_AT = 3,          /* sizes a symbolic graph is run at */
  MAX_ELEMS = 1 << 21, /* input elements of the runs at the second size and after */
};

/* One run of the interpreter: the graph's symbolic sizes bound to values,
 * its inputs and the results of the last pass. */
typedef struct instance {
  int n; /* symbolic sizes bound (0: a static graph) */
  const char *names[MAX_SYMS];
  int64_t values[MAX_SYMS];
  bool ran; /* in and ref hold tensors */
  fg_tensor in[MAX_IO], ref[MAX_IO];
} instance;

/* Adds v to a list of at most MAX_AT sizes unless it is there already. */
static void add_size(int64_t *list, int *n, int64_t v) {
  for (int i = 0; i < *n; i++)
    if (list[i] == v)
      return;
  if (*n < MAX_AT)
    list[(*n)++] = v;
}

/* The sizes s is run at: hint (T in the static graph fgdiff generated)
 * when the facts admit it, the smallest value they admit (0 or 1 or the
 * divisor), and an odd multiple of the divisor. */
static int sizes_of(const fg_sym *s, int64_t hint, int64_t *list) {
  int n = 0;
  char m[256];
  if (hint >= 0 && !strcmp(s->name, "T") && fg_sym_admits(s, hint, NULL, m, sizeof m))
    add_size(list, &n, hint);
  int64_t lo = (s->min + s->div - 1) / s->div * s->div;
  add_size(list, &n, lo);
  for (int64_t k = 1; k < 16 && n < MAX_AT && s->div <= s->max / k; k += 2) {
    int64_t v = s->div * k;
    int before = n;
    if (v >= s->min)
      add_size(list, &n, v);
    if (n > before)
      break;
  }
  return n;
}

/* The instances of g: one for a static graph; for a symbolic one, up to
 * MAX_AT bindings of all its sizes (instance k binds each size to its k-th
 * value, or its last). 0 when g has too many symbolic sizes. */
static int instances_of(const fg_graph *g, int64_t hint, instance *at) {
  if (g->nsyms > MAX_SYMS)
    return 0;
  if (g->nsyms == 0)
    return 1;
  int64_t sizes[MAX_SYMS][MAX_AT];
  int ns[MAX_SYMS], nat = 1;
  for (int i = 0; i < g->nsyms; i++) {
    ns[i] = sizes_of(&g->syms[i], hint, sizes[i]);
    nat = ns[i] > nat ? ns[i] : nat;
  }
  for (int k = 0; k < nat; k++) {
    at[k].n = g->nsyms;
    for (int i = 0; i < g->nsyms; i++) {
      at[k].names[i] = g->syms[i].name;
      at[k].values[i] = sizes[i][k < ns[i] ? k : ns[i] - 1];
    }
  }
  return nat;
}

/* " at T=37" (nothing for a static graph). */
static const char *at_text(const instance *a, char *b, size_t cap) {
  b[0] = 0;
  for (int i = 0, k = 0; i < a->n && k >= 0 && (size_t)k < cap; i++)
    k += snprintf(b + k, cap - (size_t)k, "%s%s=%" PRId64, i ? "," : " at ", a->names[i],
                  a->values[i]);
  return b;
}

/* g with the instance's sizes bound (g itself when static); NULL after an
 * error in d. */
static fg_graph *bind(fg_graph *g, const instance *a, fg_diag *d) {
  return a->n ? fg_graph_specialize(g, a->n, a->names, a->values, d) : g;
}

/* The interpreter on seeded inputs before any pass, then after every pass
 * of the pipeline, each against the one before it. A symbolic graph goes
 * through the passes as written (as fusec --emit opt shows it) and runs at
 * the sizes of instances_of. */
static finding check_passes(fg_graph *g, int64_t hint, fg_diag *d, FILE *sink, char *msg,
                            size_t cap) {
  int np = g->nparams, nr = g->nresults;
  if (np > MAX_IO || nr > MAX_IO)
    return FD_OK;
  instance *at = calloc(MAX_AT, sizeof *at);
  if (!at)
    abort(); /* a test tool: out of memory ends the run */
  int nat = instances_of(g, hint, at);
  finding f = FD_OK;
  char err[512], where[128];
  for (int k = 0; k < nat && f == FD_OK; k++) {
    fg_graph *s = bind(g, &at[k], d);
    if (!s) {
      snprintf(msg, cap, "binding%s: %s", at_text(&at[k], where, sizeof where),
               d->buf ? d->buf : "failed");
      f = FD_BIND;
      break;
    }
    int64_t elems = 0;
    for (int i = 0; i < np; i++) {
      int64_t e = 1;
      for (int j = 0; j < s->params[i]->type.rank; j++)
        e *= s->params[i]->type.dims[j].size;
      elems += e;
    }
    if (k == 0 || elems <= MAX_ELEMS) { /* past the first size, not too large */
      for (int i = 0; i < np; i++)
        fg_inputs_generate(&s->params[i]->type, 7, i, &at[k].in[i]);
      at[k].ran = fg_interp_run(s, at[k].in, at[k].ref, err, sizeof err);
      if (!at[k].ran) {
        snprintf(msg, cap, "interpreter%s: %s", at_text(&at[k], where, sizeof where), err);
        f = FD_INTERP;
        for (int i = 0; i < np; i++)
          fg_tensor_free(&at[k].in[i]);
      }
    }
    if (s != g)
      fg_graph_free(s);
  }
  for (const fg_pass *p = fg_pipeline; f == FD_OK && p->name; p++) {
    if (!fg_run_pass(p, g, NULL, d) || !fg_verify_graph(g, d)) {
      snprintf(msg, cap, "pass %s: %s", p->name, d->buf ? d->buf : "failed");
      f = FD_PASS_ERROR;
      break;
    }
    for (int k = 0; k < nat && f == FD_OK; k++) {
      if (!at[k].ran)
        continue;
      fg_tensor got[MAX_IO];
      fg_graph *s = bind(g, &at[k], d);
      bool ok = s && fg_interp_run(s, at[k].in, got, err, sizeof err);
      if (!ok) {
        snprintf(msg, cap, "%s after pass %s%s: %s", s ? "interpreter" : "binding", p->name,
                 at_text(&at[k], where, sizeof where),
                 s        ? err
                 : d->buf ? d->buf
                          : "failed");
        f = FD_PASS_ERROR;
      }
      if (s && s != g)
        fg_graph_free(s);
      /* each pass against the one before it: a reassociating pass may
       * change the bits, and those after it must keep its results */
      for (int j = 0; ok && j < nr; j++) {
        bool same = reassociates(p->name) ? fg_compare_tol_at(sink, j, &got[j], &at[k].ref[j],
                                                              fg_compare_tol_of(g, j))
                                          : same_bits(&at[k].ref[j], &got[j], signs_zeros(p->name));
        if (f == FD_OK && !same) {
          snprintf(msg, cap, "pass %s changed result %d%s", p->name, j,
                   at_text(&at[k], where, sizeof where));
          f = FD_PASS_MISMATCH;
        }
        fg_tensor_free(&at[k].ref[j]);
        at[k].ref[j] = got[j];
      }
    }
  }
  for (int k = 0; k < nat; k++) {
    for (int j = 0; at[k].ran && j < nr; j++)
      fg_tensor_free(&at[k].ref[j]);
    for (int i = 0; at[k].ran && i < np; i++)
      fg_tensor_free(&at[k].in[i]);
  }
  free(at);
  return f;
}

/* ---- the stand-in ---- */

enum { MAX_STAND_INS = 16 };

/* The stand-ins the code generator binds m's symbolic sizes to
 * (opt/symbolic.h); how many. */
static int stand_ins(fg_module *m, int64_t *q) {
  int n = 0;
  for (int gi = 0; gi < m->ngraphs && n < MAX_STAND_INS; gi++) {
    fg_graph *g = m->graphs[gi];
    if (g->nsyms == 0)
      continue;
    fg_diag d; /* a graph the code generator refuses: its error comes from fgc_compile */
    fg_diag_init(&d, "g.fg", "", 0, NULL);
    fg_sym_lowering s;
    fg_graph *l = fg_sym_lower(g, &s, &d);
    if (l && l != g)
      fg_graph_free(l);
    if (l && s.placeholder > 0)
      q[n++] = s.placeholder;
    fg_diag_free(&d);
  }
  return n;
}

/* Which stand-in q[i] the text in f holds a nonzero multiple of as a
 * decimal number (a stand-in must never reach the code), the number to
 * *hit; -1 when none. */
static int holds_stand_in(FILE *f, const int64_t *q, int nq, int64_t *hit) {
  rewind(f);
  int64_t v = 0;
  int digits = 0;
  for (int c = getc(f);; c = getc(f)) {
    if (c >= '0' && c <= '9') {
      v = digits < 18 ? v * 10 + (c - '0') : v;
      digits++;
      continue;
    }
    for (int i = 0; digits > 0 && digits <= 18 && i < nq; i++)
      if (v >= q[i] && v % q[i] == 0) {
        *hit = v;
        return i;
      }
    v = 0;
    digits = 0;
    if (c == EOF)
      return -1;
  }
}

/* Runs every check on text; the message of a finding goes to msg. Runs
 * in the calling process (check() forks). */
static finding check_text(const char *text, const char *ptx_path, const options *o, char *msg,
                          size_t cap) {
  msg[0] = 0;
  size_t len = strlen(text);
  FILE *sink = fopen("/dev/null", "w");
  fg_diag d;
  fg_diag_init(&d, "g.fg", text, len, NULL);
  fg_module *m = fg_parse("g.fg", text, len, &d);
  if (!m) {
    snprintf(msg, cap, "%s", d.buf ? d.buf : "parse failed");
    fg_diag_free(&d);
    fclose(sink);
    return FD_PARSE;
  }
  int64_t hint = -1; /* T in the static graph, from fgdiff --symbolic's comment line */
  if (sscanf(text, "# fgdiff --symbolic: T = %" SCNd64, &hint) != 1)
    hint = -1;
  finding f = FD_OK;
  for (int gi = 0; gi < m->ngraphs && f == FD_OK; gi++)
    f = check_passes(m->graphs[gi], hint, &d, sink, msg, cap);
  fg_module_free(m);
  fg_diag_free(&d);
  if (f == FD_OK) { /* segmentation, scheduling and the backend, on a fresh parse */
    fg_diag_init(&d, "g.fg", text, len, NULL);
    m = fg_parse("g.fg", text, len, &d);
    fgc_options co;
    memset(&co, 0, sizeof co);
    co.arch = "sm_90";
    co.opt_level = o->out_dir ? 3 : 0;
    co.libdevice = FUSEC_DEFAULT_LIBDEVICE;
    co.jobs = 1;
    co.passes.print_out = sink;
    /* the PTX of a symbolic graph is read back for its stand-in (the plan
     * names it: "compiled with the stand-in") */
    int64_t q[MAX_STAND_INS];
    int nq = m && o->backend ? stand_ins(m, q) : 0;
    FILE *out = ptx_path ? fopen(ptx_path, nq ? "w+" : "w") : nq ? tmpfile() : sink;
    int rc = m && out
                 ? fgc_compile(m, NULL, 0, o->backend ? FGC_EMIT_PTX : FGC_EMIT_PLAN, &co, &d, out)
                 : 3;
    int64_t hit = 0;
    int qi = rc == 0 && nq && fflush(out) == 0 ? holds_stand_in(out, q, nq, &hit) : -1;
    if (qi >= 0) {
      snprintf(msg, cap, "the artifact holds %" PRId64 ", %" PRId64 " times the stand-in %" PRId64,
               hit, hit / q[qi], q[qi]);
      f = FD_STAND_IN;
    }
    if (out && out != sink)
      fclose(out);
    if (rc == FG_EXIT_INTERNAL)
      f = FD_INTERNAL;
    else if (rc != 0)
      f = FD_REFUSED;
    if (rc != 0)
      snprintf(msg, cap, "%s", d.buf ? d.buf : "compile failed");
    if (rc != 0 && ptx_path)
      unlink(ptx_path);
    if (m)
      fg_module_free(m);
    fg_diag_free(&d);
  }
  fclose(sink);
  return f;
}

/* check_text in a child process: a crash becomes FD_CRASH. */
static finding check(const char *text, const char *ptx_path, const options *o, char *msg,
                     size_t cap) {
  int fds[2];
  if (pipe(fds) != 0)
    return check_text(text, ptx_path, o, msg, cap);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char m[2048];
    finding f = check_text(text, ptx_path, o, m, sizeof m);
    unsigned char b = (unsigned char)f;
    if (write(fds[1], &b, 1) != 1 || write(fds[1], m, strlen(m)) < 0)
      _exit(2);
    _exit(0);
  }
  close(fds[1]);
  unsigned char b = FD_CRASH;
  ssize_t got = pid > 0 ? read(fds[0], &b, 1) : 0;
  size_t n = 0;
  while (got == 1 && n + 1 < cap) {
    ssize_t k = read(fds[0], msg + n, cap - 1 - n);
    if (k <= 0)
      break;
    n += (size_t)k;
  }
  msg[n] = 0;
  close(fds[0]);
  int st = 0;
  if (pid > 0)
    waitpid(pid, &st, 0);
  if (got != 1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    snprintf(msg, cap, "the check died (%s %d)", WIFSIGNALED(st) ? "signal" : "exit status",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return FD_CRASH;
  }
  return (finding)b;
}

/* ---- the minimizer ---- */

/* Removes body lines (and then results) while the finding stays the same. */
static char *minimize(char *text, const options *o) {
  char msg[2048];
  finding want = check(text, NULL, o, msg, sizeof msg);
  fprintf(stderr, "fgdiff: minimizing a '%s' finding: %s\n", finding_names[want], msg);
  if (want == FD_OK || want == FD_REFUSED)
    return text;
  for (bool progress = true; progress;) {
    progress = false;
    /* drop one statement line at a time */
    for (char *line = strstr(text, "{\n"); line;) {
      char *start = strchr(line, '\n');
      if (!start)
        break;
      start++;
      char *end = strchr(start, '\n');
      if (!end || strncmp(start, "  return", 8) == 0 || *start == '}') {
        line = strstr(end ? end : start, "{\n");
        continue;
      }
      size_t head = (size_t)(start - text), tail = strlen(end + 1);
      char *cand = malloc(head + tail + 1);
      memcpy(cand, text, head);
      memcpy(cand + head, end + 1, tail + 1);
      if (check(cand, NULL, o, msg, sizeof msg) == want) {
        free(text);
        text = cand;
        line = text + head - 1;
        progress = true;
      } else {
        free(cand);
        line = end;
      }
    }
    /* keep fewer results: try each returned value alone */
    char *ret = strstr(text, "  return ");
    if (ret && strchr(ret, ',')) {
      char *eol = strchr(ret, '\n');
      char *list = strndup(ret + 9, (size_t)(eol - ret - 9));
      for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
           tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
          tok++;
        if (strchr(tok, '('))
          continue;
        size_t head = (size_t)(ret - text) + 9;
        buf cand = {0};
        bprintf(&cand, "%.*s%s%s", (int)head, text, tok, eol);
        if (check(cand.s, NULL, o, msg, sizeof msg) == want) {
          free(text);
          text = cand.s;
          progress = true;
          break;
        }
        free(cand.s);
      }
      free(list);
    }
  }
  return text;
}

/* ---- driver ---- */

/* The code generator's refusals, counted by message (its first line, from
 * "error: " on, digits as N so that names and numbers of graphs, values
 * and dims do not split a message). */
enum { MAX_REASONS = 64 };
typedef struct reasons {
  int n;
  char text[MAX_REASONS][160];
  long count[MAX_REASONS];
  long other; /* past MAX_REASONS distinct messages */
} reasons;

static void count_reason(reasons *r, const char *msg) {
  const char *e = strstr(msg, "error: ");
  e = e ? e + 7 : msg;
  char t[160];
  size_t n = 0;
  for (; *e && *e != '\n' && n + 1 < sizeof t; e++)
    if (*e < '0' || *e > '9')
      t[n++] = *e;
    else if (n == 0 || t[n - 1] != 'N')
      t[n++] = 'N';
  t[n] = 0;
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->text[i], t)) {
      r->count[i]++;
      return;
    }
  if (r->n == MAX_REASONS) {
    r->other++;
    return;
  }
  memcpy(r->text[r->n], t, n + 1);
  r->count[r->n++] = 1;
}

/* The messages, the most frequent first. */
static void print_reasons(reasons *r) {
  for (int i = 0; i < r->n; i++)
    for (int j = i + 1; j < r->n; j++)
      if (r->count[j] > r->count[i]) {
        char t[160];
        long c = r->count[i];
        memcpy(t, r->text[i], sizeof t);
        memcpy(r->text[i], r->text[j], sizeof t);
        memcpy(r->text[j], t, sizeof t);
        r->count[i] = r->count[j];
        r->count[j] = c;
      }
  for (int i = 0; i < r->n; i++)
    printf("refused %5ld: %s\n", r->count[i], r->text[i]);
  if (r->other)
    printf("refused %5ld: (other messages)\n", r->other);
}

static int usage(void) {
  fputs("usage: fgdiff [--seed S] [--count N] [--out DIR] [--no-backend] [--verbose] [--large]\n"
        "              [--symbolic]\n"
        "       fgdiff --check FILE.fg | --minimize FILE.fg\n",
        stderr);
  return FG_EXIT_USAGE;
}

int main(int argc, char **argv) {
  uint64_t seed = 1;
  long count = 100;
  const char *check_file = NULL, *min_file = NULL;
  options o = {true, false, NULL, false, false};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--seed") && v)
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--count") && v)
      count = strtol(argv[++i], NULL, 10);
    else if (!strcmp(a, "--out") && v)
      o.out_dir = argv[++i];
    else if (!strcmp(a, "--check") && v)
      check_file = argv[++i];
    else if (!strcmp(a, "--minimize") && v)
      min_file = argv[++i];
    else if (!strcmp(a, "--no-backend"))
      o.backend = false;
    else if (!strcmp(a, "--verbose"))
      o.verbose = true;
    else if (!strcmp(a, "--large"))
      o.large = true;
    else if (!strcmp(a, "--symbolic"))
      o.symbolic = true;
    else
      return usage();
  }
  if (count < 1)
    return usage();
  if (check_file || min_file) {
    size_t len;
    char *text = fg_read_file(check_file ? check_file : min_file, &len);
    if (!text) {
      fprintf(stderr, "fgdiff: cannot read '%s': %s\n", check_file ? check_file : min_file,
              strerror(errno));
      return FG_EXIT_INPUT;
    }
    if (min_file) {
      text = minimize(text, &o);
      fputs(text, stdout);
      free(text);
      return 0;
    }
    char msg[2048];
    finding f = check(text, NULL, &o, msg, sizeof msg);
    printf("%s: %s%s%s\n", check_file, finding_names[f], msg[0] ? ": " : "", msg);
    free(text);
    return f == FD_OK || f == FD_REFUSED ? 0 : 1;
  }
  if (o.out_dir && mkdir(o.out_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "fgdiff: cannot create '%s': %s\n", o.out_dir, strerror(errno));
    return FG_EXIT_INPUT;
  }
  long counts[FD_COUNT] = {0};
  gen_counts gc = {0};
  reasons *why = calloc(1, sizeof *why);
  if (!why)
    abort();
  for (long n = 0; n < count; n++) {
    uint64_t s = seed + (uint64_t)n;
    char name[32];
    snprintf(name, sizeof name, "g%" PRIu64, s);
    char *text = gen_graph(s, name, o.large, o.symbolic, &gc);
    char fg_path[4096] = "", ptx_path[4096] = "";
    if (o.out_dir) {
      snprintf(fg_path, sizeof fg_path, "%s/%s.fg", o.out_dir, name);
      snprintf(ptx_path, sizeof ptx_path, "%s/%s.ptx", o.out_dir, name);
      FILE *f = fopen(fg_path, "w");
      if (f) {
        fputs(text, f);
        fclose(f);
      }
    }
    if (o.large) { /* written for bench/perf_fuzz.py: no interpreter at these sizes */
      counts[FD_OK]++;
      free(text);
      continue;
    }
    char msg[2048];
    finding f = check(text, o.out_dir ? ptx_path : NULL, &o, msg, sizeof msg);
    counts[f]++;
    if (f == FD_REFUSED)
      count_reason(why, msg);
    if (f != FD_OK && (f != FD_REFUSED || o.verbose)) {
      printf("seed %" PRIu64 ": %s: %s\n", s, finding_names[f], msg);
      if (f != FD_REFUSED)
        printf("%s", text);
    }
    free(text);
  }
  long bad = 0;
  for (int f = FD_PARSE; f < FD_COUNT; f++)
    bad += counts[f];
  print_reasons(why);
  free(why);
  if (o.symbolic)
    printf("fgdiff: over T, %ld statements the frontend took with static sizes were refused and "
           "%ld inferred otherwise (dropped)\n",
           gc.sym_refused, gc.sym_differs);
  printf("fgdiff: seeds %" PRIu64 "..%" PRIu64
         ": %ld graphs, %ld statements refused by the frontend while "
         "generating; findings:",
         seed, seed + (uint64_t)count - 1, count, gc.rejected);
  for (int f = 0; f < FD_COUNT; f++)
    printf(" %s %ld%s", finding_names[f], counts[f], f + 1 < FD_COUNT ? "," : "\n");
  printf("%ld passed, %ld failed\n", count - bad, bad);
  return bad ? 1 : 0;
}
