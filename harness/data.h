/*
 * The trainer's token source: a deterministic synthetic stream from the seed (a fixed
 * random Markov chain, learnable, so the loss falls within a few steps), or a flat binary
 * file of uint16 or uint32 token ids with sequences packed back to back (wrapping at the
 * end). Sequence g of the run is tokens [g*S, g*S + S] of the stream (S inputs; targets
 * shifted by one); step k's global batch is sequences [k*GB, (k+1)*GB); data-parallel rank
 * r takes the contiguous slice [r*GB/dp, (r+1)*GB/dp) of it and its micro-batch i the
 * sequences [i*mb, (i+1)*mb) of that slice, so every layout sees the same global batch.
 */
#ifndef LB_DATA_H
#define LB_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common/layout.h"

struct lb_data {
	int vocab, seq_len;
	uint64_t seed;
	/* file source (fd >= 0) */
	int fd;
	char path[4096];
	int elem;	   /* bytes per token id: 2 or 4 */
	uint64_t n_tokens; /* ids in the file */
	/* synthetic source */
	int32_t *succ; /* (vocab, LB_DATA_SUCC) successors of each token */
};

#define LB_DATA_SUCC 4 /* successors per token in the synthetic chain */

/* Open a source: path NULL for the synthetic stream; elem 2 (u16) or 4 (u32).
 * Returns 0, or -1 with err set ("data file 'x': ..."). Release with lb_data_close. */
int lb_data_open(struct lb_data *d, const char *path, int elem, int vocab, int seq_len,
		 uint64_t seed, char *err, size_t errlen);
void lb_data_close(struct lb_data *d);

/* Sequence g: tokens (S) and targets (S). Returns 0, or -1 with err set (a read error,
 * or a token id >= vocab, naming its offset). */
int lb_data_sequence(struct lb_data *d, uint64_t g, int32_t *tokens, int32_t *targets, char *err,
		     size_t errlen);

/* Micro-batch `micro` of data-parallel rank dp_rank at optimizer step `step`:
 * micro_batch sequences, tokens and targets (micro_batch * S) each. */
int lb_data_batch(struct lb_data *d, const struct lb_layout *l, int step, int dp_rank, int micro,
		  int32_t *tokens, int32_t *targets, char *err, size_t errlen);

/* Index of the first sequence of that micro-batch (the rule in the comment above). */
uint64_t lb_data_seq_index(const struct lb_layout *l, int step, int dp_rank, int micro);

#endif
