/* Small helpers for passes that build nodes: create, set attributes by name,
 * infer. Nodes go before g->insert_point like every new node. */
#ifndef FG_OPT_BUILD_H
#define FG_OPT_BUILD_H
#include "infer.h"

fg_node *fgo_node(fg_graph *g, fg_opcode op, int nin, fg_value *const *in, fg_loc loc);
void fgo_set_ints(fg_graph *g, fg_node *n, const char *attr, const int64_t *v, int count);
void fgo_set_int(fg_node *n, const char *attr, int64_t v);
void fgo_set_bool(fg_node *n, const char *attr, bool v);
void fgo_set_dtype(fg_node *n, const char *attr, fg_dtype t);
/* Infers n's types; its first result, or NULL after reporting an error. */
fg_value *fgo_finish(fg_node *n, fg_diag *d);
/* One-liners for common shapes of node. */
fg_value *fgo_unary(fg_graph *g, fg_opcode op, fg_value *a, fg_loc loc, fg_diag *d);
fg_value *fgo_binary(fg_graph *g, fg_opcode op, fg_value *a, fg_value *b, fg_loc loc, fg_diag *d);
fg_value *fgo_cast(fg_graph *g, fg_value *a, fg_dtype t, fg_loc loc,
                   fg_diag *d); /* a itself if same */
/* a reshaped to t's dims (a new node even where they are a's). */
fg_value *fgo_reshape(fg_graph *g, fg_value *a, const fg_type *t, fg_loc loc, fg_diag *d);

#endif
