/* The coordinate maps of the indexing ops (index.h). */
#include "index.h"

const fg_type *fg_index_domain(const fg_node *n) {
  switch (n->op->code) {
  case FG_OP_SCATTER_ADD:
    return &n->in[1]->type;
  case FG_OP_INDEX_ADD:
    return &n->in[2]->type;
  default:
    return &n->out[0]->type;
  }
}

void fg_index_map_of(const fg_node *n, fg_index_map *m) {
  const fg_type *x = &n->in[0]->type, *idx = &n->in[1]->type;
  int64_t d = fg_attr_int(n, "dim");
  m->dim = (int)(d < 0 ? d + x->rank : d);
  m->domain_rank = fg_index_domain(n)->rank;
  m->idx_rank = idx->rank;
  m->x_rank = x->rank;
  m->size = x->dims[m->dim].sym ? 0 : x->dims[m->dim].size;
  bool one_d = n->op->code == FG_OP_INDEX_SELECT || n->op->code == FG_OP_INDEX_ADD;
  for (int i = 0; i < idx->rank; i++)
    m->idx_src[i] = one_d                                           ? m->dim
                    : (!idx->dims[i].sym && idx->dims[i].size == 1) ? FG_INDEX_ZERO
                                                                    : i;
  for (int i = 0; i < x->rank; i++)
    m->x_src[i] = i == m->dim                                 ? FG_INDEX_VALUE
                  : (!x->dims[i].sym && x->dims[i].size == 1) ? FG_INDEX_ZERO
                                                              : i;
}
