/* The canonical .fg printer: printing a parsed module and parsing the text
 * back gives the same text. Nested expressions are printed as separate
 * statements with fresh names; literals stay inline. */
#ifndef FG_PRINT_H
#define FG_PRINT_H
#include <stdio.h>

#include "ir.h"

void fg_print_graph(FILE *f, const fg_graph *g);
void fg_print_module(FILE *f, const fg_module *m);
/* A float literal in the shortest form that reads back to the same double
 * and lexes as a float (always has '.', 'e', or is inf/-inf/nan). */
void fg_format_float(char *buf, int cap, double v);

#endif
