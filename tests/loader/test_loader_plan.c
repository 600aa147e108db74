/* Plan parser: valid plans and >= 20 malformed ones, each rejected with its
 * message and line number. */
#include "plan_parse.h"
#include "tl.h"

#define PTX                                                                                        \
  "\n.version 7.8\n.target sm_90\n.address_size 64\n"                                              \
  "/* .entry commented_out( */\n"                                                                  \
  ".visible .entry k0(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"                                        \
  ".visible .entry k0_v(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"                                      \
  ".visible .entry k1(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"                                        \
  ".visible .entry k0_n(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"                                      \
  ".visible .entry k0_vn(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"

static const char *BASE =
    "// fusec-plan 2\n"                                                    /* 1 */
    "// target sm_90\n"                                                    /* 2 */
    "// graph g params 3 results 2 temps 1 kernels 1 syms 0\n"             /* 3 */
    "// param 0 x bf16 [16,64] strides [64,1]\n"                           /* 4 */
    "// param 1 s f32 scalar\n"                                            /* 5 */
    "// param 2 b bf16 [64] strides [1]\n"                                 /* 6 */
    "// result 0 bf16 [16,64] strides [64,1] written\n"                    /* 7 */
    "// result 1 bf16 [1024] strides [1] view p0 offset 0\n"               /* 8 */
    "// temp 0 bytes 256 align 16 zero\n"                                  /* 9 */
    "// kernel 0 k0 grid 4 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0\n" /* 10 */
    "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n"                           /* 11 */
    "// end\n"                                                             /* 12 */
    PTX;

typedef struct bad_case {
  const char *find, *repl; /* edit of BASE; find NULL: repl is the whole text */
  int line;
  const char *msg;
} bad_case;

static const bad_case BAD[] = {
    {NULL, "", 1, "not a fusec artifact"},
    {NULL, ".version 7.8\n.target sm_90\n", 1, "not a fusec artifact"},
    {"fusec-plan 2", "fusec-plan 1", 1,
     "plan version 1, this loader reads versions 2 to 5: recompile the model with this fusec"},
    {"fusec-plan 2", "fusec-plan 6", 1, "plan version 6, this loader reads versions 2 to 5"},
    {"fusec-plan 2", "fusec-plan x", 1, "expected '// fusec-plan 5'"},
    {"// target sm_90\n", "", 2, "expected 'target'"},
    {"target sm_90", "target sm90", 2, "bad target 'sm90'"},
    {"target sm_90", "target sm_90 extra", 2, "unexpected token 'extra'"},
    {"params 3", "params 4", 7, "expected 'param' line"},
    {"results 2", "results 1", 8, "expected 'temp' line"},
    {"param 0 x", "param 1 x", 4, "expected param 0, found param 1"},
    {"x bf16 [16", "x bf17 [16", 4, "unknown dtype 'bf17'"},
    {"[16,64] strides [64,1]\n// param 1", "[16,64] strides [1]\n// param 1", 4,
     "2 sizes but 1 strides"},
    {"[16,64] strides [64,1]\n// param 1", "[-16,64] strides [64,1]\n// param 1", 4,
     "negative size -16 in dim 0"},
    {"[16,64] strides [64,1]\n// param 1", "[16,6x4] strides [64,1]\n// param 1", 4,
     "param 0 ('x') dim 1: bad formula '6x4': unexpected 'x'"},
    {"[16,64] strides [64,1]\n// param 1",
     "[1,1,1,1,1,1,1,1,1] strides [1,1,1,1,1,1,1,1,1]\n// param 1", 4, "more than 8 dims"},
    {"param 2 b", "param 2 x", 6, "duplicate param name 'x'"},
    {"view p0 offset 0", "view p9 offset 0", 8, "view base p9 does not exist"},
    {"view p0 offset 0", "view p0 offset 1", 8, "leaves its base p0"},
    {"view p0 offset 0", "view p1 offset 0", 8, "view base p1 is a scalar parameter"},
    {"view p0 offset 0", "view r1 offset 0", 8, "view base r1 is not a written result"},
    {"view p0 offset 0", "view p0 offset -1", 8, "view offset -1 is out of range"},
    {"result 1 bf16 [1024]", "result 1 f32 [1024]", 8,
     "view dtype f32 differs from its base's bf16"},
    {"[16,64] strides [64,1] written", "[16,64] strides [0,1] written", 7, "zero stride"},
    {"written", "owned", 7, "expected 'written', 'inplace' or 'view', found 'owned'"},
    {"strides [64,1] written", "strides [64,1] inplace p0", 7,
     "result 0: 'inplace' needs plan version 3 (this file says 2)"},
    {"align 16 zero", "align 24 zero", 9, "temp align 24 is not a power of two"},
    {"align 16 zero", "align 8 zero", 9, "temp align 8 is out of range"},
    {"align 16 zero", "align 16 zeroed", 9, "expected 'zero' or 'nozero', found 'zeroed'"},
    {"args p0,s1,p2", "args p1,s1,p2", 10, "argument p1 is a scalar parameter (use s1)"},
    {"args p0,s1,p2,r0,t0", "args p0,s1,p2,r1,t0", 10, "argument r1 is a view result"},
    {"args p0,s1,p2,r0,t0", "args p0,s1,p2,r0,t3", 10, "argument t3: no such temp"},
    {"args p0,s1,p2,r0,t0", "args p0,s1,p2,r0,q0", 10, "bad reference 'q0'"},
    {"kernel 0 k0 grid", "kernel 0 k9 grid", 10, "entry 'k9' is not defined in the PTX"},
    {"kernel 0 k0 grid", "kernel 0 commented_out grid", 10,
     "entry 'commented_out' is not defined in the PTX"},
    {"block 256 1 1", "block 1024 2 1", 10, "more than 1024 threads"},
    {"grid 4 1 1", "grid 4 1 0", 10, "grid z 0 is out of range"},
    {"grid 4 1 1", "grid -1 1 1", 10, "grid x -1 is out of range"},
    {"grid 4 1 1", "grid 99999999999999999999 1 1", 10, "grid x: expected an integer"},
    {"smem 0 args", "smem 0 argz", 10, "expected 'args', found 'argz'"},
    {"ptrs p0,r0", "ptrs p0,t1", 11, "pointer t1 is not an argument of kernel 0"},
    {"k0_v align 16", "k0_v align 3", 11, "kernel-vec align 3 is not a power of two"},
    {"// kernel-vec 0 k0_v align 16 ptrs p0,r0\n",
     "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// kernel-vec 0 k0_v align 16 ptrs p0,r0\n", 12,
     "kernel 0 has two kernel-vec lines"},
    {"// kernel 0 k0 grid 4 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0\n// kernel-vec 0 k0_v "
     "align 16 ptrs p0,r0\n",
     "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// kernel 0 k0 grid 4 1 1 block 256 1 1 smem 0 "
     "args p0,s1,p2,r0,t0\n",
     10, "kernel-vec 0 does not follow its kernel line"},
    {"// end\n", "", 12, "the plan ends inside graph 'g' (opened at line 3) without 'end'"},
    {"// end\n", "// end now\n", 12, "unexpected token 'now'"},
    {"// temp 0", "// launch 0", 9, "unknown plan line 'launch'"},
    {"// param 1 s", "//param 1 s", 5, "a plan line must start with '// '"},
    {"// param 1 s f32", "// param 1 s\001f32", 5, "invalid character (byte 0x01)"},
    {"// graph g params 3 results 2 temps 1 kernels 1 syms 0\n", "", 3,
     "expected '// graph ...', found 'param'"},
    {"// end\n", "// end\n// graph g params 0 results 0 temps 0 kernels 0 syms 0\n// end\n", 13,
     "duplicate graph name 'g'"},
    {"kernels 1 syms 0", "kernels 1", 3, "line is incomplete (10 tokens, expected 12)"},
    {"syms 0", "syms 1", 4, "expected 'sym' line"},
    {"syms 0", "syms 257", 3, "syms count 257 is out of range [0, 256]"},
    {"args p0,s1,p2,r0,t0", "args p0,s1,p2,r0,z0", 10, "argument z0: no such sym (0 syms)"},
    {"bytes 256 align", "bytes 4096/0 align", 9,
     "temp bytes: bad formula '4096/0': it divides by zero"},
    {"bytes 256 align", "bytes 4-8 align", 9, "temp bytes: bad formula '4-8': it goes below zero"},
    {"bytes 256 align", "bytes 4611686018427387904*2 align", 9,
     "temp bytes: bad formula '4611686018427387904*2': it overflows int64"},
    {"bytes 256 align", "bytes 2305843009213693952+1 align", 9,
     "temp bytes 2305843009213693953 is out of range [0, 2305843009213693951]"},
    {"bytes 256 align", "bytes T*4 align", 9,
     "temp bytes: bad formula 'T*4': unknown name 'T' (the graph has no syms)"},
    {"grid 4 1 1", "grid 2*2 2-2 1", 10, "grid y 0 is out of range [1, 65535]"},
    {"offset 0", "offset (4", 8, "view offset: bad formula '(4': missing ')'"},
    {"offset 0", "offset 4)", 8, "view offset: bad formula '4)': unexpected ')'"},
    {"bytes 256 align", "bytes max(4,5) align", 9,
     "temp bytes: bad formula 'max(4,5)': min and max need plan version 3 (this file says 2)"},
    {"offset 0", "offset 1024-1024+1", 8, "leaves its base p0"},
    {"// end\n", "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// end\n", 12,
     "kernel 0 has two kernel-vec lines"},
    {"// param 0 x", "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// param 0 x", 4,
     "expected 'param' line"},
    {"temps 1", "temps 99999999", 3, "temps count 99999999 is out of range"},
    {"// end\n", "// kernel-resident 0 cluster 2\n// kernel-resident 0 cluster 2\n// end\n", 13,
     "kernel 0 has two kernel-resident lines"},
    {"// end\n", "// kernel-resident 0 cluster 3\n// end\n", 12,
     "kernel-resident 0: grid 4x1x1 is not made of clusters of 3"},
    {"// end\n", "// kernel-resident 0 cluster 0\n// end\n", 12,
     "kernel-resident cluster 0 is out of range"},
    {"// end\n", "// kernel-resident 0 clusters 2\n// end\n", 12,
     "expected 'cluster', found 'clusters'"},
    {"// end\n", "// kernel-resident 1 cluster 1\n// end\n", 12,
     "kernel-resident 1 does not follow its kernel line"},
    {"// end\n", "// kernel-narrow 0 k0_n k0_vn max 4096\n// end\n", 12,
     "kernel-narrow 0: graph 'g' has no syms (the narrow entries are chosen by the value of sym "
     "0)"},
};

/* A plan with syms (plan version 2). */
static const char *SYMBASE =
    "// fusec-plan 2\n"                                        /* 1 */
    "// target sm_90\n"                                        /* 2 */
    "// graph g params 3 results 2 temps 1 kernels 1 syms 2\n" /* 3 */
    "// sym 0 T min 1 max 65536 div 8\n"                       /* 4 */
    "// sym 1 B min 0 max 64 div 1\n"                          /* 5 */
    "// param 0 x bf16 [B,T,64] strides [T*64,64,1]\n"         /* 6 */
    "// param 1 s f32 scalar\n"                                /* 7 */
    "// param 2 b bf16 [T] strides [1]\n"                      /* 8 */
    "// result 0 bf16 [B,T,64] strides [T*64,64,1] written\n"  /* 9 */
    "// result 1 bf16 [B*T*64] strides [1] view p0 offset 0\n" /* 10 */
    "// temp 0 bytes (B*T+15)/16*16*4 align 16 zero\n"         /* 11 */
    "// kernel 0 k0 grid (B*T+127)/128 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0,z0,z1\n"
    /* 12 */
    "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n" /* 13 */
    "// end\n"                                   /* 14 */
    PTX;

static const bad_case SYMBAD[] = {
    {"syms 2", "syms 3", 6, "expected 'sym' line"},
    {"sym 1 B", "sym 2 B", 5, "expected sym 1, found sym 2"},
    {"sym 1 B", "sym 1 T", 5, "duplicate sym name 'T'"},
    {"sym 1 B", "sym 1 9B", 5, "bad sym name '9B'"},
    {"min 1 max 65536 div 8", "min 9 max 8 div 8", 4, "sym T: max 8 is below min 9"},
    {"max 65536 div 8", "max 65536 div 0", 4, "sym div 0 is out of range"},
    {"min 1 max", "min -1 max", 4, "sym min -1 is out of range [0, 4611686018427387904]"},
    {"max 65536 div", "max 4611686018427387905 div", 4,
     "sym max 4611686018427387905 is out of range"},
    {"max 65536 div 8", "max 65536 div 8 extra", 4, "unexpected token 'extra'"},
    {"max 65536 div 8", "max 65536 divisor 8", 4, "expected 'div', found 'divisor'"},
    {"strides [T*64,64,1]\n// param 1", "strides [Q*64,64,1]\n// param 1", 6,
     "param 0 ('x') strides dim 0: bad formula 'Q*64': unknown name 'Q' (the graph's syms: T, B)"},
    {"[B,T,64] strides [T*64,64,1]\n// param 1", "[2,T,64] strides [T*64,64,1]\n// param 1", 5,
     "sym 1 'B' is the size of no parameter's dim"},
    {"[B,T,64] strides [T*64,64,1]\n// param 1", "[B,T*1,64] strides [T*64,64,1]\n// param 1", 6,
     "param 0 ('x') dim 1: a parameter's size is an integer or a sym name, not 'T*1'"},
    {"[B,T,64] strides [T*64,64,1] written", "[B,T,64] strides [T*,64,1] written", 9,
     "result 0 strides dim 0: bad formula 'T*': expected a number, a sym name or '(' at the end"},
    {"[B,T,64] strides [T*64,64,1] written", "[B,T,64] strides [T*64,,1] written", 9,
     "result 0 strides dim 1: bad formula '': expected a number, a sym name or '(' at the end"},
    {"[B,T,64] strides [T*64,64,1] written", "[B,T,64] strides [T*64,6$4,1] written", 9,
     "result 0 strides dim 1: bad formula '6$4': unexpected '$'"},
    {"grid (B*T+127)/128 1 1", "grid (B*T+127/128 1 1", 12,
     "grid x: bad formula '(B*T+127/128': missing ')'"},
    {"grid (B*T+127)/128 1 1", "grid (B*T+127)/128 1 (T)/2)", 12,
     "grid z: bad formula '(T)/2)': unexpected ')'"},
    {"bytes (B*T+15)/16*16*4", "bytes (B*T+15)/(16-16)*4", 11,
     "temp bytes: bad formula '(B*T+15)/(16-16)*4': it divides by zero"},
    {"bytes (B*T+15)/16*16*4", "bytes 99999999999999999999*T", 11,
     "temp bytes: bad formula '99999999999999999999*T': the number '99999999999999999999' is too "
     "large"},
    {"z0,z1", "z0,z2", 12, "kernel 0: argument z2: no such sym (2 syms)"},
    {"ptrs p0,r0", "ptrs p0,z0", 13, "bad reference 'z0' (expected one of prt"},
    {"bytes (B*T+15)/16*16*4",
     "bytes ((((((((((((((((((((((((((((((((((T)))))))))))))))))))))))))))))))))", 11,
     "parentheses nested more than 32 deep"},
};

/* SYMBASE with a kernel-narrow line (between the kernel and its kernel-vec). */
static const char *NARROWBASE =
    "// fusec-plan 2\n"                                        /* 1 */
    "// target sm_90\n"                                        /* 2 */
    "// graph g params 3 results 2 temps 1 kernels 1 syms 2\n" /* 3 */
    "// sym 0 T min 1 max 65536 div 8\n"                       /* 4 */
    "// sym 1 B min 0 max 64 div 1\n"                          /* 5 */
    "// param 0 x bf16 [B,T,64] strides [T*64,64,1]\n"         /* 6 */
    "// param 1 s f32 scalar\n"                                /* 7 */
    "// param 2 b bf16 [T] strides [1]\n"                      /* 8 */
    "// result 0 bf16 [B,T,64] strides [T*64,64,1] written\n"  /* 9 */
    "// result 1 bf16 [B*T*64] strides [1] view p0 offset 0\n" /* 10 */
    "// temp 0 bytes (B*T+15)/16*16*4 align 16 zero\n"         /* 11 */
    "// kernel 0 k0 grid (B*T+127)/128 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0,z0,z1\n"
    /* 12 */
    "// kernel-narrow 0 k0_n k0_vn max 4096\n"   /* 13 */
    "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n" /* 14 */
    "// end\n"                                   /* 15 */
    PTX;

static const bad_case NARROWBAD[] = {
    {"// end\n", "// kernel-narrow 0 k0_n k0_vn max 4096\n// end\n", 15,
     "kernel 0 has two kernel-narrow lines"},
    {"kernel-narrow 0 k0_n", "kernel-narrow 1 k0_n", 13,
     "kernel-narrow 1 does not follow its kernel line"},
    {"kernel-narrow 0 k0_n", "kernel-narrow x k0_n", 13,
     "kernel-narrow index: expected an integer, found 'x'"},
    {"kernel-narrow 0 k0_n", "kernel-narrow -1 k0_n", 13, "kernel-narrow index -1 is out of range"},
    {"k0_n k0_vn", "9k k0_vn", 13, "bad kernel-narrow entry name '9k'"},
    {"k0_n k0_vn", "k0_n 9k", 13,
     "bad kernel-narrow vec entry name '9k' (a name, or '-' for none)"},
    {"k0_n k0_vn", "k9 k0_vn", 13, "kernel-narrow 0: entry 'k9' is not defined in the PTX"},
    {"k0_n k0_vn", "k0_n k9", 13, "kernel-narrow 0: vec entry 'k9' is not defined in the PTX"},
    {"k0_n k0_vn", "commented_out k0_vn", 13,
     "kernel-narrow 0: entry 'commented_out' is not defined in the PTX"},
    {"k0_n k0_vn max", "k0_n max", 13, "line is incomplete (5 tokens, expected 6)"},
    {"k0_n k0_vn max 4096", "k0_n k0_vn max 4096 4096", 13, "unexpected token '4096'"},
    {"k0_n k0_vn", "k0_n -", 13,
     "kernel-narrow 0: vec entry '-', but kernel 0 has a kernel-vec line ('k0_v'): name its "
     "narrow variant"},
    /* the kernel-vec line after all the kernel lines: checked at 'end', the
     * message names the kernel-narrow line */
    {"// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// end\n", "// end\n", 13,
     "kernel-narrow 0: vec entry 'k0_vn', but kernel 0 has no kernel-vec line (write '-')"},
    {"// kernel-narrow 0 k0_n k0_vn max 4096\n// kernel-vec 0 k0_v align 16 ptrs p0,r0\n",
     "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// kernel-narrow 0 k0_n - max 4096\n", 14,
     "kernel-narrow 0: vec entry '-', but kernel 0 has a kernel-vec line ('k0_v')"},
    {"max 4096", "max -1", 13, "kernel-narrow max -1 is out of range [0, 4611686018427387904]"},
    {"max 4096", "max 4611686018427387905", 13,
     "kernel-narrow max 4611686018427387905 is out of range"},
    {"max 4096", "max 1e3", 13, "kernel-narrow max: expected an integer, found '1e3'"},
    {"max 4096", "max T", 13, "kernel-narrow max: expected an integer, found 'T'"},
    {"max 4096", "maximum 4096", 13, "expected 'max', found 'maximum'"},
    {"// kernel 0 k0 grid (B*T+127)/128 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0,z0,z1\n"
     "// kernel-narrow 0 k0_n k0_vn max 4096\n",
     "// kernel-narrow 0 k0_n k0_vn max 4096\n"
     "// kernel 0 k0 grid (B*T+127)/128 1 1 block 256 1 1 smem 0 args p0,s1,p2,r0,t0,z0,z1\n",
     12, "kernel-narrow 0 does not follow its kernel line"},
    {"// param 0 x", "// kernel-narrow 0 k0_n k0_vn max 4096\n// param 0 x", 6,
     "expected 'param' line"},
    {"// temp 0", "// kernel-narrow 0 k0_n k0_vn max 4096\n// temp 0", 11, "expected 'temp' line"},
};

static void valid_symbolic(void) {
  plan p;
  char err[512] = "";
  int rc = plan_parse(SYMBASE, strlen(SYMBASE), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc)
    return;
  const plan_graph *g = &p.graphs[0];
  CHECK(g->n_syms == 2 && !strcmp(g->syms[0].name, "T") && g->syms[0].min == 1 &&
        g->syms[0].max == 65536 && g->syms[0].div == 8 && !strcmp(g->syms[1].name, "B"));
  /* T is bound by x dim 1 first, then checked at b dim 0; B by x dim 0 */
  CHECK(g->syms[0].first_param == 0 && g->syms[0].first_dim == 1 && g->syms[1].first_dim == 0);
  CHECK(g->n_binds == 3 && g->binds[0].sym == 1 && g->binds[0].first && g->binds[1].sym == 0 &&
        g->binds[1].first && g->binds[2].param == 2 && !g->binds[2].first);
  const plan_param *x = &g->params[0];
  CHECK(x->shape.symbolic && x->sym[0] == 1 && x->sym[1] == 0 && x->sym[2] == -1);
  CHECK(!plan_expr_const(&x->shape.strides[0]) && plan_expr_const(&x->shape.strides[1]));
  CHECK(g->results[1].symbolic && g->results[1].check_at_run && g->symbolic_temps);
  CHECK(g->results[0].check_at_run); /* a written result's strides: checked at run */
  const plan_kernel *k = &g->kernels[0];
  CHECK(k->grid_symbolic && k->n_args == 7 && k->args[5].kind == 'z' && k->args[6].index == 1);
  char b[32];
  CHECK(!strcmp(plan_expr_text(g, &g->temps[0].bytes, b, sizeof b), "(B*T+15)/16*16*4"));
  CHECK(!strcmp(plan_expr_text(g, &x->shape.strides[1], b, sizeof b), "64"));
  CHECK(plan_expr_sym(g, &g->results[0].shape.sizes[1]) == 0 &&
        plan_expr_sym(g, &g->results[1].shape.sizes[0]) == -1);
  /* the compiled formulas, evaluated: T = 120, B = 3 */
  int64_t vals[2] = {120, 3}, v = -1;
  CHECK(plan_eval(g, &g->temps[0].bytes, vals, &v) == PLAN_EVAL_OK && v == 1472);
  CHECK(plan_eval(g, &k->grid[0], vals, &v) == PLAN_EVAL_OK && v == 3);
  CHECK(plan_eval(g, &x->shape.strides[0], vals, &v) == PLAN_EVAL_OK && v == 7680);
  CHECK(plan_eval(g, &g->results[1].shape.sizes[0], vals, &v) == PLAN_EVAL_OK && v == 23040);
  int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 30};
  CHECK(plan_eval(g, &g->results[1].shape.sizes[0], huge, &v) == PLAN_EVAL_OVERFLOW);
  plan_free(&p);
  /* the operators: precedence, floor division, remainder, parentheses */
  const char *ops = "// fusec-plan 3\n// target sm_90\n"
                    "// graph f params 1 results 0 temps 6 kernels 0 syms 1\n"
                    "// sym 0 N min 0 max 100 div 1\n"
                    "// param 0 x u8 [N] strides [1]\n"
                    "// temp 0 bytes 2+N*3-1 align 16 nozero\n"
                    "// temp 1 bytes (N+7)/8%5 align 16 nozero\n"
                    "// temp 2 bytes N-(N-1)*(2+1)/3 align 16 nozero\n"
                    "// temp 3 bytes 7*(6-N) align 16 nozero\n"
                    "// temp 4 bytes max(3,min(40,(N+1)/2))*2 align 16 nozero\n"
                    "// temp 5 bytes min(max(N,2),5) align 16 nozero\n"
                    "// end\n" PTX;
  rc = plan_parse(ops, strlen(ops), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0) {
    g = &p.graphs[0];
    int64_t n10 = 10, n0 = 0;
    CHECK(plan_eval(g, &g->temps[0].bytes, &n10, &v) == PLAN_EVAL_OK && v == 31);
    CHECK(plan_eval(g, &g->temps[1].bytes, &n10, &v) == PLAN_EVAL_OK && v == 2);
    CHECK(plan_eval(g, &g->temps[2].bytes, &n10, &v) == PLAN_EVAL_OK && v == 1);
    CHECK(plan_eval(g, &g->temps[2].bytes, &n0, &v) == PLAN_EVAL_NEGATIVE);
    CHECK(plan_eval(g, &g->temps[3].bytes, &n10, &v) == PLAN_EVAL_NEGATIVE);
    CHECK(plan_eval(g, &g->temps[3].bytes, &n0, &v) == PLAN_EVAL_OK && v == 42);
    /* min and max (version 3): a grid clamped between two bounds */
    int64_t n100 = 100, n1 = 1;
    CHECK(plan_eval(g, &g->temps[4].bytes, &n10, &v) == PLAN_EVAL_OK && v == 10);
    CHECK(plan_eval(g, &g->temps[4].bytes, &n0, &v) == PLAN_EVAL_OK && v == 6);
    CHECK(plan_eval(g, &g->temps[4].bytes, &n100, &v) == PLAN_EVAL_OK && v == 80);
    CHECK(plan_eval(g, &g->temps[5].bytes, &n1, &v) == PLAN_EVAL_OK && v == 2);
    CHECK(plan_eval(g, &g->temps[5].bytes, &n10, &v) == PLAN_EVAL_OK && v == 5);
    plan_free(&p);
  }
  /* min and max written wrong */
  static const struct {
    const char *formula, *msg;
  } badmm[] = {
      {"max(4)", "bad formula 'max(4)': max takes two operands: missing ','"},
      {"min(4,5", "bad formula 'min(4,5': missing ')' after min's operands"},
      {"max(4,4-8)", "bad formula 'max(4,4-8)': it goes below zero"},
      {"min(N,)", "bad formula 'min(N,)': unexpected ')'"},
  };
  for (size_t i = 0; i < sizeof badmm / sizeof badmm[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "// fusec-plan 3\n// target sm_90\n"
             "// graph f params 1 results 0 temps 1 kernels 0 syms 1\n"
             "// sym 0 N min 0 max 100 div 1\n// param 0 x u8 [N] strides [1]\n"
             "// temp 0 bytes %s align 16 nozero\n// end\n%s",
             badmm[i].formula, PTX);
    err[0] = 0;
    CHECK_MSG(plan_parse(text, strlen(text), &p, err, sizeof err) == -1 &&
                  strstr(err, badmm[i].msg),
              "min/max case %zu: '%s'", i, err);
  }
  /* kernel-resident with a symbolic grid: checked at run, not at load */
  char *res = tl_replace(SYMBASE, "// end\n", "// kernel-resident 0 cluster 2\n// end\n");
  rc = plan_parse(res, strlen(res), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0) {
    CHECK(p.graphs[0].kernels[0].resident && p.graphs[0].kernels[0].cluster == 2);
    plan_free(&p);
  }
  free(res);
}

static void valid_narrow(void) {
  plan p;
  char err[512] = "";
  int rc = plan_parse(NARROWBASE, strlen(NARROWBASE), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0) {
    const plan_kernel *k = &p.graphs[0].kernels[0];
    CHECK(k->narrow_entry && !strcmp(k->narrow_entry, "k0_n") && k->narrow_vec_entry &&
          !strcmp(k->narrow_vec_entry, "k0_vn") && k->narrow_max == 4096 && k->vec_entry);
    CHECK(!strcmp(plan_kernel_entry(k, PLAN_ENTRY_PLAIN), "k0") &&
          !strcmp(plan_kernel_entry(k, PLAN_ENTRY_VEC), "k0_v") &&
          !strcmp(plan_kernel_entry(k, PLAN_ENTRY_NARROW), "k0_n") &&
          !strcmp(plan_kernel_entry(k, PLAN_ENTRY_NARROW_VEC), "k0_vn"));
    plan_free(&p);
  }
  /* no kernel-vec: '-'; the line after all the kernel lines and after
   * kernel-resident; max at both ends of its range */
  static const struct {
    const char *find, *repl;
    int64_t max;
  } ok[] = {
      {"// kernel-narrow 0 k0_n k0_vn max 4096\n// kernel-vec 0 k0_v align 16 ptrs p0,r0\n",
       "// kernel-narrow 0 k0_n - max 4096\n", 4096},
      {"// kernel-narrow 0 k0_n k0_vn max 4096\n// kernel-vec 0 k0_v align 16 ptrs p0,r0\n",
       "// kernel-vec 0 k0_v align 16 ptrs p0,r0\n// kernel-resident 0 cluster 1\n"
       "// kernel-narrow 0 k0_n k0_vn max 0\n",
       0},
      {"max 4096", "max 4611686018427387904", INT64_C(1) << 62},
  };
  for (int i = 0; i < (int)(sizeof ok / sizeof ok[0]); i++) {
    char *text = tl_replace(NARROWBASE, ok[i].find, ok[i].repl);
    rc = plan_parse(text, strlen(text), &p, err, sizeof err);
    CHECK_MSG(rc == 0, "case %d: %s", i, err);
    if (rc == 0) {
      const plan_kernel *k = &p.graphs[0].kernels[0];
      CHECK(k->narrow_entry && !strcmp(k->narrow_entry, "k0_n") && k->narrow_max == ok[i].max);
      CHECK((k->narrow_vec_entry == NULL) == (k->vec_entry == NULL));
      CHECK(i != 1 || k->resident);
      plan_free(&p);
    }
    free(text);
  }
  /* a kernel without the line has no narrow entries */
  rc = plan_parse(SYMBASE, strlen(SYMBASE), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0) {
    const plan_kernel *k = &p.graphs[0].kernels[0];
    CHECK(!k->narrow_entry && !k->narrow_vec_entry && !plan_kernel_entry(k, PLAN_ENTRY_NARROW) &&
          !plan_kernel_entry(k, PLAN_N_ENTRIES));
    plan_free(&p);
  }
}

static int run_bad(const char *base, const bad_case *cases, int n) {
  for (int i = 0; i < n; i++) {
    const bad_case *c = &cases[i];
    char *text = c->find ? tl_replace(base, c->find, c->repl) : strdup(c->repl);
    plan p;
    char err[512] = "";
    memset(&p, 0x5a, sizeof p);
    int rc = plan_parse(text, strlen(text), &p, err, sizeof err);
    char want_line[32];
    snprintf(want_line, sizeof want_line, "line %d: ", c->line);
    CHECK_MSG(rc == -1, "case %d (%s) was accepted", i, c->msg);
    CHECK_MSG(strncmp(err, want_line, strlen(want_line)) == 0,
              "case %d: expected '%s...', got '%s'", i, want_line, err);
    CHECK_MSG(strstr(err, c->msg) != NULL, "case %d: expected '%s' in '%s'", i, c->msg, err);
    CHECK_MSG(p.n_graphs == 0 && p.graphs == NULL, "case %d: plan not left empty", i);
    if (getenv("FGL_TEST_VERBOSE"))
      printf("rejected: %s\n", err);
    free(text);
  }
  return n;
}

static void valid_base(void) {
  plan p;
  char err[512] = "";
  int rc = plan_parse(BASE, strlen(BASE), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc)
    return;
  CHECK(p.sm == 90 && !strcmp(p.target, "sm_90"));
  CHECK(p.n_graphs == 1);
  const plan_graph *g = plan_find(&p, "g");
  CHECK(g && g->n_params == 3 && g->n_results == 2 && g->n_temps == 1 && g->n_kernels == 1);
  CHECK(!strcmp(g->params[0].name, "x") && g->params[0].dtype == FGL_BF16 &&
        g->params[0].shape.rank == 2 && !g->params[0].shape.symbolic && g->n_syms == 0);
  CHECK(g->params[0].shape.sizes[0].value == 16 && g->params[0].shape.strides[0].value == 64 &&
        g->params[0].sym[0] == -1 && plan_expr_const(&g->params[0].shape.sizes[0]));
  CHECK(g->params[1].is_scalar && g->params[1].dtype == FGL_F32);
  CHECK(!g->results[0].is_view && g->results[1].is_view && g->results[1].base.kind == 'p' &&
        g->results[1].base.index == 0);
  CHECK(g->temps[0].bytes.value == 256 && g->temps[0].align == 16 && g->temps[0].zero);
  CHECK(!g->symbolic_temps && g->n_code == 0);
  const plan_kernel *k = &g->kernels[0];
  CHECK(!strcmp(k->entry, "k0") && k->grid[0].value == 4 && !k->grid_symbolic &&
        k->block[0] == 256 && k->n_args == 5);
  CHECK(k->args[1].kind == 's' && k->args[1].index == 1 && k->args[4].kind == 't');
  CHECK(k->vec_entry && !strcmp(k->vec_entry, "k0_v") && k->vec_align == 16 && k->n_vec_ptrs == 2);
  CHECK(plan_find(&p, "nope") == NULL);
  CHECK(!k->resident);
  plan_free(&p);
  /* kernel-resident: CTAs that wait for one another, in clusters of 2 */
  char *res = tl_replace(BASE, "// end\n", "// kernel-resident 0 cluster 2\n// end\n");
  rc = plan_parse(res, strlen(res), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (!rc) {
    CHECK(p.graphs[0].kernels[0].resident && p.graphs[0].kernels[0].cluster == 2);
    plan_free(&p);
  }
  free(res);
}

static void valid_variants(void) {
  char err[512];
  plan p;
  /* CRLF line ends, several graphs, kernel-vec lines after all kernels, a
   * zero-kernel graph, sm_90a, a view of a written result, an LLVM banner
   * comment right after the plan, 0-d tensors and empty tensors. */
  const char *text = "// fusec-plan 2\r\n"
                     "// target sm_90a\r\n"
                     "// graph two params 1 results 3 temps 0 kernels 2 syms 0\r\n"
                     "// param 0 x f32 [4,8] strides [8,1]\r\n"
                     "// result 0 f32 [4,8] strides [8,1] written\r\n"
                     "// result 1 f32 [8] strides [1] view r0 offset 24\r\n"
                     "// result 2 f32 [] strides [] written\r\n"
                     "// kernel 0 k0 grid 1 1 1 block 32 1 1 smem 0 args p0,r0\r\n"
                     "// kernel 1 k1 grid 1 1 1 block 32 1 1 smem 0 args r0,r2\r\n"
                     "// kernel-vec 1 k0_v align 16 ptrs r0\r\n"
                     "// kernel-vec 0 k0_v align 8 ptrs p0,r0\r\n"
                     "// end\r\n"
                     "// graph alias params 2 results 2 temps 0 kernels 0 syms 0\r\n"
                     "// param 0 x u8 [0,5] strides [5,1]\r\n"
                     "// param 1 n i64 scalar\r\n"
                     "// result 0 u8 [0,5] strides [5,1] view p0 offset 0\r\n"
                     "// result 1 u8 [5,0] strides [0,7] view p0 offset 99\r\n"
                     "// end\r\n"
                     "//\r\n"
                     "// Generated by LLVM NVPTX Back-End\r\n"
                     "//\r\n" PTX;
  int rc = plan_parse(text, strlen(text), &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0) {
    CHECK(p.n_graphs == 2 && p.sm == 90);
    CHECK(p.graphs[0].kernels[1].vec_align == 16 && p.graphs[0].kernels[0].vec_align == 8);
    CHECK(p.graphs[0].results[2].shape.rank == 0);
    CHECK(p.graphs[1].n_kernels == 0 && p.graphs[1].params[0].shape.sizes[0].value == 0);
    plan_free(&p);
  }
  /* the fixture used by the GPU test */
  size_t len;
  char *add = tl_read_file(FGL_FIXTURES "/add.ptx", &len);
  CHECK(add != NULL);
  if (add) {
    rc = plan_parse(add, len, &p, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
      CHECK(p.n_graphs == 2 && plan_find(&p, "axpy") && plan_find(&p, "ident"));
      plan_free(&p);
    }
    free(add);
  }
  /* not NUL-terminated input: parse a prefix buffer exactly */
  size_t n = strlen(BASE);
  char *copy = malloc(n);
  memcpy(copy, BASE, n);
  rc = plan_parse(copy, n, &p, err, sizeof err);
  CHECK_MSG(rc == 0, "%s", err);
  if (rc == 0)
    plan_free(&p);
  free(copy);
}

int main(void) {
  valid_base();
  valid_variants();
  valid_symbolic();
  valid_narrow();
  int n = run_bad(BASE, BAD, (int)(sizeof BAD / sizeof BAD[0]));
  n += run_bad(SYMBASE, SYMBAD, (int)(sizeof SYMBAD / sizeof SYMBAD[0]));
  n += run_bad(NARROWBASE, NARROWBAD, (int)(sizeof NARROWBAD / sizeof NARROWBAD[0]));
  printf("%d malformed plans rejected\n", n);
  /* truncation at every byte of the plan never crashes and never accepts a
   * prefix that cuts a line short (all prefixes end inside the plan) */
  const char *bases[3] = {BASE, SYMBASE, NARROWBASE};
  for (int b = 0; b < 3; b++) {
    size_t plan_len = strstr(bases[b], "// end\n") - bases[b];
    for (size_t k = 0; k < plan_len; k++) {
      plan p;
      char err[512];
      CHECK_MSG(plan_parse(bases[b], k, &p, err, sizeof err) == -1, "prefix %zu accepted", k);
    }
  }
  TL_DONE("test_loader_plan");
}
