/*
 * Files embedded into the `layoutbench` binary at build time (the SQL schema, the
 * quickstart spec, ...): one source of truth in the tree, a generated copy in the
 * binary. The list is EMBED_FILES in the Makefile; build/gen/embed.c is generated.
 */
#ifndef LB_EMBED_H
#define LB_EMBED_H

#include <stddef.h>

/* The embedded copy of a repository path such as "results/schema.sql", NUL-terminated,
 * or NULL when that path is not embedded. *len (if not NULL) gets its length. */
const char *lb_embedded(const char *path, size_t *len);

#endif
