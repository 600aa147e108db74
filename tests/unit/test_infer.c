/* Shape and dtype inference from the op table: PyTorch promotion with its
 * three tiers (dimensioned tensors, 0-d tensors, weak scalars), broadcasting,
 * reductions and view shapes, checked on one-statement graphs. */
#include <stdio.h>
#include <string.h>

#include "diag.h"
#include "ir.h"
#include "parse.h"

static int passed, failed;

/* The type of the first result of `graph g(PARAMS) { return EXPR }`, or the
 * first line of the error. */
static void infer(const char *params, const char *expr, char *out, int cap) {
  char src[1024];
  snprintf(src, sizeof src, "graph g(%s) {\n  return %s\n}\n", params, expr);
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &d);
  if (m) {
    fg_type_str(&m->graphs[0]->results[0]->type, out, cap);
  } else {
    const char *e = d.buf ? strstr(d.buf, "error: ") : NULL;
    snprintf(out, (size_t)cap, "error: %.*s", e ? (int)strcspn(e + 7, "\n") : 0, e ? e + 7 : "");
  }
  fg_module_free(m);
  fg_diag_free(&d);
}

static void expect(int line, const char *params, const char *expr, const char *want) {
  char got[256];
  infer(params, expr, got, sizeof got);
  if (strcmp(got, want) == 0) {
    passed++;
  } else {
    failed++;
    printf("%s:%d: %s with (%s): got '%s', want '%s'\n", __FILE__, line, expr, params, got, want);
  }
}
#define EXPECT(p, e, w) expect(__LINE__, p, e, w)

int main(void) {
  /* weak scalars never widen a tensor of their category */
  EXPECT("x: bf16[4]", "add(x, 1e-5)", "bf16[4]");
  EXPECT("x: i32[4]", "add(x, 2)", "i32[4]");
  EXPECT("x: i32[4]", "add(x, 0.5)", "f32[4]");
  EXPECT("x: bool[4]", "add(x, 1)", "i64[4]");
  EXPECT("x: bf16[4], eps: f64", "add(x, eps)", "bf16[4]");
  EXPECT("x: i32[4], s: f64", "mul(x, s)", "f32[4]");
  EXPECT("a: f64, b: f32", "add(a, b)", "f64");
  /* 0-d tensors rank below dimensioned ones of the same category */
  EXPECT("x: bf16[4], y: f32[]", "add(x, y)", "bf16[4]");
  EXPECT("x: i32[4], y: f64[]", "add(x, y)", "f64[4]");
  EXPECT("x: f32[], y: f64[]", "add(x, y)", "f64[]");
  /* promote_types */
  EXPECT("x: f16[4], y: bf16[4]", "add(x, y)", "f32[4]");
  EXPECT("x: u8[4], y: i8[4]", "add(x, y)", "i16[4]");
  EXPECT("x: i16[4], y: u8[4]", "add(x, y)", "i16[4]");
  EXPECT("x: i64[4], y: f16[4]", "add(x, y)", "f16[4]");
  EXPECT("x: f8e4m3[4], y: bf16[4]", "add(x, y)",
         "error: 'add' cannot promote operand dtypes (f8e4m3, bf16): float8 types only combine "
         "with themselves; insert a cast");
  EXPECT("x: f8e4m3[4]", "mul(x, 2.0)", "f8e4m3[4]");
  /* result rules */
  EXPECT("x: i32[4], y: i32[4]", "div(x, y)", "i32[4]");
  EXPECT("x: i32[4]", "exp(x)", "f32[4]");
  EXPECT("x: f32[4], y: bf16[4]", "eq(x, y)", "bool[4]");
  EXPECT("x: f32[4]", "isnan(x)", "bool[4]");
  EXPECT("c: bool[4], x: bf16[4]", "where(c, x, 1.0)", "bf16[4]");
  EXPECT("c: f32[4], x: bf16[4]", "where(c, x, x)",
         "error: the condition of 'where' must be bool, not f32");
  EXPECT("x: i32[4]", "clamp(x, min=0.5)", "f32[4]");
  EXPECT("x: i32[4]", "clamp(x, min=0)", "i32[4]");
  EXPECT("x: f32[4]", "cast(x, dtype=bf16)", "bf16[4]");
  /* broadcasting */
  EXPECT("x: f32[4,1], y: f32[1,3]", "mul(x, y)", "f32[4,3]");
  EXPECT("x: f32[2,4,3], y: f32[3]", "sub(x, y)", "f32[2,4,3]");
  EXPECT("x: f32[N,3], y: f32[1,3]", "add(x, y)", "f32[N,3]");
  EXPECT("x: f32[4,8], y: f32[5]", "add(x, y)",
         "error: cannot broadcast shapes [4,8] and [5] in 'add'");
  /* reductions */
  EXPECT("x: bf16[4,8]", "sum(x, dims=[-1], keepdim=true)", "bf16[4,1]");
  EXPECT("x: bf16[4,8]", "amax(x)", "bf16[]");
  EXPECT("x: f32[2,3,4]", "mean(x, dims=[0,2])", "f32[3]");
  EXPECT("x: i32[4]", "sum(x, dtype=i64)", "i64[]");
  EXPECT("x: i32[4]", "mean(x)",
         "error: 'mean' needs a floating-point input (got i32); pass dtype= a float type");
  EXPECT("x: f32[4,8]", "var(x, dims=[1], correction=0)", "f32[4]");
  EXPECT("x: f32[4,8]", "sum(x, dims=[2])",
         "error: dimension 2 is out of range for a tensor of rank 2");
  /* views */
  EXPECT("x: f32[4,6]", "reshape(x, shape=[3,-1])", "f32[3,8]");
  EXPECT("x: f32[2,3,4]", "permute(x, dims=[2,0,1])", "f32[4,2,3]");
  EXPECT("x: f32[2,3,4]", "transpose(x, dim0=0, dim1=-1)", "f32[4,3,2]");
  EXPECT("w: f32[16]", "broadcast_in_dim(w, shape=[2,3,16], dims=[2])", "f32[2,3,16]");
  EXPECT("x: f32[8,1,32]", "expand(x, shape=[2,-1,16,-1])", "f32[2,8,16,32]");
  EXPECT("x: f32[1,4,1]", "squeeze(x)", "f32[4]");
  EXPECT("x: f32[2,4]", "squeeze(x, dims=[0])", "f32[2,4]");
  EXPECT("x: f32[4]", "unsqueeze(x, dim=-1)", "f32[4,1]");
  EXPECT("x: f32[10]", "slice(x, starts=[-4], ends=[100], steps=[2])", "f32[2]");
  EXPECT("x: f32[10]", "slice(x, starts=[5], ends=[2])", "f32[0]");
  EXPECT("a: bf16[2,3], b: f32[2,5]", "cat(a, b, dim=1)", "f32[2,8]");
  EXPECT("x: f32[4,8]", "pad(x, pad=[1,1,-2,0])", "f32[6,6]");
  EXPECT("", "iota(5, dtype=i32)", "i32[5]");
  EXPECT("", "full(shape=[2,2], value=1.5)", "f32[2,2]");
  EXPECT("", "full(shape=[3], value=7)", "i64[3]");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
