/* A string-keyed hash table for the parser's scopes (value names of a graph,
 * graph names of a file). Keys are (pointer, length) pairs that the caller
 * keeps alive; lookups are O(length), so megabyte-long names stay linear. */
#ifndef FG_SYMTAB_H
#define FG_SYMTAB_H
#include <stdbool.h>
#include <stddef.h>

typedef struct fg_symtab_slot {
  const char *key;
  size_t len;
  void *val;
} fg_symtab_slot;

typedef struct fg_symtab {
  fg_symtab_slot *slots;
  size_t cap, count;
} fg_symtab;

void fg_symtab_init(fg_symtab *t);
void fg_symtab_free(fg_symtab *t);
void fg_symtab_clear(fg_symtab *t);
void *fg_symtab_get(const fg_symtab *t, const char *key, size_t len);
/* Inserts or replaces; false on out-of-memory. */
bool fg_symtab_put(fg_symtab *t, const char *key, size_t len, void *val);

#endif
