/* What other alltoallv paths (the stream-ordered device path) can share
 * with zc_remap_alltoallv: its argument checks and its count agreement. */
#ifndef ZC_COLL_ALLTOALLV_H
#define ZC_COLL_ALLTOALLV_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/comm.h"

/* n counts and displacements (elements of `elem` bytes): non-negative,
 * no end past the address space, `buf` non-NULL when a count is not 0.
 * The names are the arguments' for the messages. */
zc_status_t zc_alltoallv_check_counts(const int64_t *counts, const int64_t *displs, int n,
                                      size_t elem, const void *buf, const char *counts_name,
                                      const char *displs_name, const char *buf_name);

/* Collective over `comm`: ZC_OK when both ends of every block name the
 * same size in bytes, else ZC_ERR_MISMATCH on every rank (the two ends of
 * a disagreeing block name it and both sizes).  `seq` is the call's
 * collective sequence number (comm->coll_seq), the same on every rank. */
zc_status_t zc_alltoallv_agree(zc_comm_h comm, unsigned seq, const int64_t *sendcounts,
                               const int64_t *recvcounts, size_t elem);

#endif
