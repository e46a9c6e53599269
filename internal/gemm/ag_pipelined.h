/* internal/gemm/ag_pipelined.h: the all-gather + GEMM's copy-engine paths (iris_gemm.h):
 * copies of peers' A pieces into the staging buffer on the plan's copy streams, the
 * streams' fork and join (closed by a device barrier), the chunking of the pipelined path,
 * and the two paths' runs: PIPELINED (chunk copies beside chunk GEMMs on one or two GEMM
 * streams) and UNFUSED (gather everything, then one GEMM). cuBLASLt through
 * internal/gemm/common.h. Part of its implementation (IRIS_IMPLEMENTATION); not a public
 * header. */
#ifndef IRIS_INTERNAL_GEMM_AG_PIPELINED_H
#define IRIS_INTERNAL_GEMM_AG_PIPELINED_H
#include "../../iris_gemm.h"
#include "../core/platform.h"
#include "host.h"
#include "ag_plan.h"

/* Rows [r0, r1) of the gathered A from its owner(s) into the staging buffer, on copy
 * stream(s); `local` says whether this rank's own piece is copied too. ROWS: one
 * contiguous piece per owner; COLS: a 2D piece (the rows' slice of K/W columns) from
 * every rank, each on the owner's stream so they run side by side. */
static iris_status_t iris_ag_gemm_copy_rows(iris_ag_gemm_t *g, const char *a, long long r0, long long r1, int local) {
  const iris_ag_gemm_desc_t *d = &g->d;
  const size_t row_bytes = (size_t)d->K * g->es;
  iris_status_t st;
  int q;
  void *src;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    while (r0 < r1) {
      const long long q_ = r0 / ml, end = (q_ + 1) * ml < r1 ? (q_ + 1) * ml : r1;
      q = (int)q_;
      if (q != g->me || local) {
        iris_translate_host(g->ctx, a, q, &src);
        if ((st = iris_ag_gemm_gpu(g, iris_gpu_memcpy_async(g->staged + (size_t)r0 * row_bytes, (const char *)src + (size_t)(r0 - q_ * ml) * row_bytes, (size_t)(end - r0) * row_bytes,
                                               g->copy[0]), "copying a peer's rows of A")) != IRIS_SUCCESS) return st;
      }
      r0 = end;
    }
    return IRIS_SUCCESS;
  }
  {
    const size_t kl_bytes = (size_t)(d->K / g->W) * g->es;
    for (q = 0; q < g->W; ++q) {
      if (q == g->me && !local) continue;
      iris_translate_host(g->ctx, a, q, &src);
      if ((st = iris_ag_gemm_gpu(g, iris_gpu_memcpy2d_async(g->staged + (size_t)r0 * row_bytes + q * kl_bytes, row_bytes, (const char *)src + (size_t)r0 * kl_bytes, kl_bytes, kl_bytes,
                                               (size_t)(r1 - r0), g->copy[q]), "copying a peer's columns of A")) != IRIS_SUCCESS) return st;
    }
    return IRIS_SUCCESS;
  }
}

/* Every copy stream waits for the main stream (fork); the main stream waits for every
 * copy stream (join). */
static iris_status_t iris_ag_gemm_fork(iris_ag_gemm_t *g, iris_stream_t s) {
  iris_status_t st;
  int q;
  if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->fork, s), "recording the fork event")) != IRIS_SUCCESS) return st;
  for (q = 0; q < g->W; ++q) if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(g->copy[q], g->fork), "joining a copy stream")) != IRIS_SUCCESS) return st;
  return IRIS_SUCCESS;
}
/* Copies done on every stream -> a device barrier on copy stream 0 (after it, no peer
 * reads our A) -> the main stream waits for it. */
static iris_status_t iris_ag_gemm_close(iris_ag_gemm_t *g, iris_stream_t s) {
  int q;
  iris_status_t st;
  for (q = 1; q < g->W; ++q) {
    if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->tail[q], g->copy[q]), "recording a copy-stream end")) != IRIS_SUCCESS) return st;
    if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(g->copy[0], g->tail[q]), "joining the copy streams")) != IRIS_SUCCESS) return st;
  }
  if ((st = iris_barrier_device(g->ctx, g->copy[0])) != IRIS_SUCCESS) return st;
  if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->join, g->copy[0]), "recording the join event")) != IRIS_SUCCESS) return st;
  if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(s, g->join), "waiting for the copies")) != IRIS_SUCCESS) return st;
  return IRIS_SUCCESS;
}

/* A GEMM of `rows` rows that fills the GPU for a long time on its own (2^38 multiply-adds,
 * ~0.7 ms on an H200): no chunking, one GEMM stream; measured: docs/tuning.md. */
static int iris_ag_gemm_big_chunk(long long rows, const iris_ag_gemm_desc_t *d) { return (double)rows * (double)d->N * (double)d->K >= 274877906944.0; }

/* Chunk boundaries (rows). ROWS: the chunks of each peer's shard; COLS: chunks of all
 * M rows, the first one half as tall so the exposed first copy is short. */
static void iris_ag_gemm_plan_chunks(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *d = &g->d;
  int n = d->chunks, i;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    /* automatic: two chunks per shard where they stay large (4096 rows) or where the
     * copies weigh most against the GEMMs (small N); measured: docs/tuning.md */
    if (!n) n = !iris_ag_gemm_big_chunk(ml, d) && (ml >= 4096 || (ml >= 2048 && d->N <= 2048)) ? 2 : 1;
    if (n > ml) n = (int)ml;
    for (i = 0; i <= n; ++i) g->chunk_row[i] = ml * i / n;
  } else {
    long long first, rest;
    if (!n) n = d->M >= 4096 ? 4 : d->M >= 1024 ? 2 : 1;
    if (n > d->M) n = (int)d->M;
    first = n > 1 ? (d->M / (2 * n - 1) + 127) / 128 * 128 : d->M;
    /* the other n - 1 chunks need a row each: rounded up to 128 rows, the first chunk can
     * leave fewer (M = 130, 16 chunks: 128 + 2 rows), and a chunk of 0 rows has no GEMM */
    if (first >= d->M || first < 1 || d->M - first < n - 1) first = d->M / n;
    rest = d->M - first;
    g->chunk_row[0] = 0;
    g->chunk_row[1] = n > 1 ? first : d->M;
    for (i = 2; i <= n; ++i) g->chunk_row[i] = first + rest * (i - 1) / (n - 1);
  }
  g->nchunks = n;
}

#if defined(IRIS_GEMM_HAVE_BLAS)
/* Enqueue C[row0 : row0 + rows] = A(rows, lda) * B (+ bias) on GEMM stream `which` (0: the
 * caller's stream, 1: the plan's second one; each has its own workspace). */
static iris_status_t iris_ag_gemm_blas_run(iris_ag_gemm_t *g, const char *a, long long lda, long long rows, long long row0, const void *b, const void *bias, void *c,
                                           iris_stream_t main_stream, int which) {
  return iris_gemm_blas_run(&g->blas, a, lda, rows, row0, b, bias, c, which ? g->aux : main_stream, which);
}

/* PIPELINED. ROWS: copies of peers' shards in ring order (me+1, me+2, ...) on one copy
 * stream, one event per chunk; the local shard is multiplied straight from the heap,
 * then each chunk as its event fires. COLS: chunk c's pieces from every rank (local one
 * included) on the owners' streams; chunk c's GEMM waits for all of them.
 * The GEMMs alternate between the caller's stream and a second one (gemm_streams = 2),
 * so the last wave of one GEMM overlaps the first of the next: each GEMM covers only
 * M/W (or M/chunks) rows, and run one after another they lose their tails to wave
 * quantization (BENCHMARKS.md, "W chunks"). Their C rows are disjoint. */
static iris_status_t iris_ag_gemm_run_pipelined(iris_ag_gemm_t *g, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_status_t st;
  int i, j, q, k = 0;
  if ((st = iris_ag_gemm_fork(g, s)) != IRIS_SUCCESS) return st;
  if ((g->gemm_streams > 1) && (st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(g->aux, g->fork), "forking the second GEMM stream")) != IRIS_SUCCESS) return st;
#define IRIS_GEMM_NEXT_STREAM() (g->gemm_streams > 1 ? (k++ & 1) : 0)
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    for (i = 1; i < g->W; ++i) {
      q = (g->me + i) % g->W;
      for (j = 0; j < g->nchunks; ++j) {
        if ((st = iris_ag_gemm_copy_rows(g, a, q * ml + g->chunk_row[j], q * ml + g->chunk_row[j + 1], 0)) != IRIS_SUCCESS) return st;
        if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->ev[q][j], g->copy[0]), "recording a chunk event")) != IRIS_SUCCESS) return st;
      }
    }
    if ((st = iris_ag_gemm_blas_run(g, a, d->K, ml, g->me * ml, b, bias, c, s, IRIS_GEMM_NEXT_STREAM())) != IRIS_SUCCESS) return st;
    for (i = 1; i < g->W; ++i) {
      q = (g->me + i) % g->W;
      for (j = 0; j < g->nchunks; ++j) {
        const long long r0 = q * ml + g->chunk_row[j];
        const int w = IRIS_GEMM_NEXT_STREAM();
        if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(w ? g->aux : s, g->ev[q][j]), "waiting for a chunk")) != IRIS_SUCCESS) return st;
        if ((st = iris_ag_gemm_blas_run(g, g->staged + (size_t)r0 * d->K * g->es, d->K, g->chunk_row[j + 1] - g->chunk_row[j], r0, b, bias, c, s, w)) != IRIS_SUCCESS)
          return st;
      }
    }
  } else {
    for (j = 0; j < g->nchunks; ++j) {
      if ((st = iris_ag_gemm_copy_rows(g, a, g->chunk_row[j], g->chunk_row[j + 1], 1)) != IRIS_SUCCESS) return st;
      for (q = 0; q < g->W; ++q) if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->ev[q][j], g->copy[q]), "recording a chunk event")) != IRIS_SUCCESS) return st;
    }
    for (j = 0; j < g->nchunks; ++j) {
      const long long r0 = g->chunk_row[j];
      const int w = IRIS_GEMM_NEXT_STREAM();
      for (q = 0; q < g->W; ++q) if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(w ? g->aux : s, g->ev[q][j]), "waiting for a chunk")) != IRIS_SUCCESS) return st;
      if ((st = iris_ag_gemm_blas_run(g, g->staged + (size_t)r0 * d->K * g->es, d->K, g->chunk_row[j + 1] - r0, r0, b, bias, c, s, w)) != IRIS_SUCCESS) return st;
    }
  }
#undef IRIS_GEMM_NEXT_STREAM
  if (g->gemm_streams > 1) {
    if ((st = iris_ag_gemm_gpu(g, iris_gpu_event_record(g->aux_join, g->aux), "recording the second GEMM stream's end")) != IRIS_SUCCESS) return st;
    if ((st = iris_ag_gemm_gpu(g, iris_gpu_stream_wait(s, g->aux_join), "joining the second GEMM stream")) != IRIS_SUCCESS) return st;
  }
  return iris_ag_gemm_close(g, s);
}

/* UNFUSED: gather all of A, then one GEMM. A in rows: iris_all_gather of the shards into
 * the local M x K (the collectives' latency kernels; it meets the peers itself, so run
 * opens with no barrier): on 4 H200s at M = 128 the all-gather by copy engines between
 * two device barriers took 1.0-2.1x the time of NCCL's all-gather + cuBLAS (BENCHMARKS.md). A in
 * columns (a strided gather): copy engines, every owner's stream. */
static iris_status_t iris_ag_gemm_run_unfused(iris_ag_gemm_t *g, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_status_t st;
  if (g->coll) {
    if ((st = iris_all_gather(g->ctx, a, g->staged, (size_t)(d->M / g->W) * d->K, d->a_type, s)) != IRIS_SUCCESS) return st;
    return iris_ag_gemm_blas_run(g, g->staged, d->K, d->M, 0, b, bias, c, s, 0);
  }
  if ((st = iris_ag_gemm_fork(g, s)) != IRIS_SUCCESS) return st;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    int q;
    for (q = 0; q < g->W; ++q) {
      void *src;
      iris_translate_host(g->ctx, a, q, &src);
      if ((st = iris_ag_gemm_gpu(g, iris_gpu_memcpy_async(g->staged + (size_t)q * ml * d->K * g->es, src, (size_t)ml * d->K * g->es, g->copy[q]), "copying a shard of A")) != IRIS_SUCCESS) return st;
    }
  } else if ((st = iris_ag_gemm_copy_rows(g, a, 0, d->M, 1)) != IRIS_SUCCESS)
    return st;
  if ((st = iris_ag_gemm_close(g, s)) != IRIS_SUCCESS) return st; /* the GEMM needs every copy */
  return iris_ag_gemm_blas_run(g, g->staged, d->K, d->M, 0, b, bias, c, s, 0);
}
#endif /* IRIS_GEMM_HAVE_BLAS */
#endif /* IRIS_INTERNAL_GEMM_AG_PIPELINED_H */
