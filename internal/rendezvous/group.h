/* internal/rendezvous/group.h: the in-process group of bring-up mode 3 (iris_init_local): one thread
 * per context meets at a condition variable; the buffer carries the allgather. Generations
 * make it reusable without resets. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_RENDEZVOUS_GROUP_H
#define IRIS_INTERNAL_RENDEZVOUS_GROUP_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"

typedef struct iris_detail_group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int world, refs, arrived;
  int devices[IRIS_MAX_RANKS];
  unsigned long generation;
  unsigned char *present;
  char *buf;
  size_t bytes;
} iris_detail_group_t;

IRIS_INTERNAL iris_status_t iris_detail_group_wait(iris_detail_group_t *g, int rank, int timeout_ms) {
  unsigned long gen;
  struct timespec ts;
  char list[512];
  int i;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition variable runs on CLOCK_MONOTONIC */
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  gen = g->generation;
  g->present[rank] = 1;
  if (++g->arrived == g->world) {
    g->arrived = 0;
    memset(g->present, 0, (size_t)g->world);
    g->generation++;
    pthread_cond_broadcast(&g->cv);
    return IRIS_SUCCESS;
  }
  while (g->generation == gen) {
    if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT && g->generation == gen) {
      {
        unsigned char miss[IRIS_MAX_RANKS];
        for (i = 0; i < g->world; i++) miss[i] = (unsigned char)!g->present[i];
        iris_detail_rank_list(miss, g->world, list, sizeof list);
      }
      g->present[rank] = 0;
      g->arrived--;
      return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rank %d: in-process barrier timed out after %d ms; ranks %s never arrived (one host thread per context must call it)",
                              rank, timeout_ms, list);
    }
  }
  return IRIS_SUCCESS;
}
IRIS_INTERNAL iris_status_t iris_detail_group_allgather(iris_detail_group_t *g, int rank, const void *send, void *recv, size_t bytes, int timeout_ms) {
  iris_status_t st;
  pthread_mutex_lock(&g->mu);
  /* the first rank to arrive sets the call's size (0: a barrier); every other rank must
   * pass the same, or a barrier would pass beside an allgather that reads stale blocks */
  if (g->arrived == 0) {
    if (bytes) {
      char *nb = (char *)realloc(g->buf, bytes * (size_t)g->world);
      if (!nb) { pthread_mutex_unlock(&g->mu); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", rank); }
      g->buf = nb;
    }
    g->bytes = bytes;
  } else if (g->bytes != bytes) {
    size_t theirs = g->bytes;
    pthread_mutex_unlock(&g->mu);
    return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s of %zu bytes while another rank is in %s of %zu", rank, bytes ? "an allgather" : "a barrier",
                            bytes, theirs ? "an allgather" : "a barrier", theirs);
  }
  if (bytes) memcpy(g->buf + (size_t)rank * bytes, send, bytes);
  st = iris_detail_group_wait(g, rank, timeout_ms);
  if (st == IRIS_SUCCESS && bytes) {
    memcpy(recv, g->buf, bytes * (size_t)g->world);
    st = iris_detail_group_wait(g, rank, timeout_ms); /* nobody refills buf before all have read it */
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}
/* A group of `world` contexts whose barrier times out on CLOCK_MONOTONIC (wall-clock
 * steps do not shorten or stretch it). NULL when out of memory. */
IRIS_INTERNAL iris_detail_group_t *iris_detail_group_create(int world) {
  iris_detail_group_t *g = (iris_detail_group_t *)calloc(1, sizeof *g);
  pthread_condattr_t attr;
  if (!g || !(g->present = (unsigned char *)calloc((size_t)world, 1))) { free(g); return NULL; }
  pthread_mutex_init(&g->mu, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &attr);
  pthread_condattr_destroy(&attr);
  g->world = world;
  g->refs = world;
  return g;
}
IRIS_INTERNAL void iris_detail_group_release(iris_detail_group_t *g) {
  int last;
  pthread_mutex_lock(&g->mu);
  last = --g->refs == 0;
  pthread_mutex_unlock(&g->mu);
  if (!last) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g->present);
  free(g->buf);
  free(g);
}

#endif /* IRIS_INTERNAL_RENDEZVOUS_GROUP_H */
