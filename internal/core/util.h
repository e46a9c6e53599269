/* internal/core/util.h: small helpers: the monotonic clock and sleeps, FNV hashing, the strict
 * parsers of integers and sizes (environment and config), random bytes, this process's
 * token, rank lists for messages. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_UTIL_H
#define IRIS_INTERNAL_CORE_UTIL_H
#include "../../iris.h"
#include "sys.h"
#include "status.h"

IRIS_INTERNAL long long iris_detail_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
IRIS_INTERNAL void iris_detail_sleep_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}
IRIS_INTERNAL uint64_t iris_detail_fnv(uint64_t h, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++) { h ^= (v >> (8 * i)) & 0xff; h *= 1099511628211ULL; }
  return h;
}
/* Strict non-negative decimal int: digits only (no sign, no space), at most INT_MAX.
 * 0: unset or empty; 1: *out set; -1: malformed (detail names var=value). */
IRIS_INTERNAL int iris_detail_parse_uint(const char *var, const char *s, int *out) {
  long long v = 0;
  const char *c;
  if (!s || !*s) return 0;
  for (c = s; *c; c++) {
    if (*c < '0' || *c > '9') {
      iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is not a non-negative decimal integer", var, s);
      return -1;
    }
    v = v * 10 + (*c - '0');
    if (v > INT_MAX) {
      iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is out of range (at most %d)", var, s, INT_MAX);
      return -1;
    }
  }
  *out = (int)v;
  return 1;
}
/* ---- the environment: every IRIS_* variable is read through iris_detail_env, so each one
 * follows docs/options.md's rule alike: unset means the default; set but empty, or a value
 * it cannot take, is an error naming the variable and its value, never the default. */
/* 0: unset; 1: set and not empty (*value); -1: set but empty (the detail says so).
 * Through lookup (iris_launch_env's form, for environments given as tables; NULL: getenv). */
IRIS_INTERNAL int iris_detail_env_in(iris_getenv_fn lookup, void *user, const char *name, const char **value) {
  const char *s = lookup ? lookup(user, name) : getenv(name);
  if (!s) return 0;
  if (!*s) {
    iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s is set but empty; unset it for the default, or give a value", name);
    return -1;
  }
  *value = s;
  return 1;
}
IRIS_INTERNAL int iris_detail_env(const char *name, const char **value) { return iris_detail_env_in(NULL, NULL, name, value); }
/* An IRIS_* variable as a strict non-negative int: 0 unset, 1 *out set, -1 malformed or
 * set but empty. */
IRIS_INTERNAL int iris_detail_env_int(const char *name, int *out) {
  const char *s = NULL;
  const int got = iris_detail_env(name, &s);
  return got <= 0 ? got : iris_detail_parse_uint(name, s, out);
}
/* An IRIS_* variable that takes one of n words (choices[i], e.g. "0", "1", "auto"): 0
 * unset, 1 *index set, -1 set but empty or another value (the detail lists the choices,
 * with `meaning` after them). */
IRIS_INTERNAL inline int iris_detail_env_choice(const char *name, const char *const *choices, int n, const char *meaning, int *index) {
  const char *s = NULL;
  char list[96] = "";
  int i;
  const int got = iris_detail_env(name, &s);
  if (got <= 0) return got;
  for (i = 0; i < n; ++i)
    if (!strcmp(s, choices[i])) {
      *index = i;
      return 1;
    }
  for (i = 0; i < n; ++i) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? (i == n - 1 ? " or " : ", ") : "", choices[i]);
  iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s='%.40s': give %s%s", name, s, list, meaning ? meaning : "");
  return -1;
}
/* An IRIS_* switch, "0" or "1": 0 unset (*on untouched), 1 *on set, -1 anything else. */
IRIS_INTERNAL inline int iris_detail_env_flag(const char *name, const char *meaning, int *on) {
  static const char *const bits[2] = {"0", "1"};
  return iris_detail_env_choice(name, bits, 2, meaning, on);
}
/* A bound in ms from the environment: unset leaves *out; 0, empty or malformed is an error. */
IRIS_INTERNAL iris_status_t iris_detail_env_ms(const char *name, int least, int *out) {
  int v = 0, got = iris_detail_env_int(name, &v);
  if (got < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (got == 0) return IRIS_SUCCESS;
  if (v < least) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%d: a bound of at least %d ms is needed", name, v, least);
  *out = v;
  return IRIS_SUCCESS;
}

/* The one size parser for the environment and the config: digits, then an optional
 * K/M/G/T (any case, binary: 2^10 ...), then an optional "iB" or "B" after a suffix,
 * or "B" alone ("512", "512B", "64K", "2GiB", "1TB"). No sign, no space, no fraction;
 * overflow of size_t is an error. IRIS_SUCCESS with *out set (0 allowed: callers
 * decide), IRIS_ERROR_INVALID_ARGUMENT naming var and the text otherwise. */
IRIS_INTERNAL iris_status_t iris_detail_parse_size_var(const char *var, const char *s, size_t *out) {
  size_t v = 0;
  int shift = 0;
  const char *c = s;
  if (!s || !*s) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s is empty; give a size such as 512M or 2GiB", var);
  if (*c < '0' || *c > '9') goto bad;
  for (; *c >= '0' && *c <= '9'; c++) {
    if (v > (SIZE_MAX - (size_t)(*c - '0')) / 10) goto big;
    v = v * 10 + (size_t)(*c - '0');
  }
  switch (*c) {
  case 'K': case 'k': shift = 10; break;
  case 'M': case 'm': shift = 20; break;
  case 'G': case 'g': shift = 30; break;
  case 'T': case 't': shift = 40; break;
  default: break;
  }
  if (shift) {
    c++;
    if (c[0] == 'i' && c[1] == 'B') c += 2;
    else if (c[0] == 'B') c++;
  } else if (c[0] == 'B') {
    c++;
  }
  if (*c) goto bad;
  if (shift && v > (SIZE_MAX >> shift)) goto big;
  *out = v << shift;
  return IRIS_SUCCESS;
bad:
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is not a size: digits, then optionally K, M, G or T, then optionally iB or B (e.g. 512M, 2GiB)", var, s);
big:
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s overflows a size (at most %llu bytes)", var, s, (unsigned long long)SIZE_MAX);
}
/* Compatibility form (iris_collectives.h): bytes, or 0 when unset or malformed. */
static inline size_t iris_detail_parse_size(const char *s) {
  char keep[sizeof iris_detail_errbuf];
  size_t v = 0;
  iris_detail_copy(keep, sizeof keep, iris_detail_errbuf);
  if (!s || iris_detail_parse_size_var("size", s, &v) != IRIS_SUCCESS) v = 0;
  iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, keep);
  return v;
}

/* n random bytes: the kernel's (/dev/urandom), else a hash of clocks, pid and
 * addresses (good enough to tell processes apart; not a secret). */
IRIS_INTERNAL void iris_detail_random(void *buf, size_t n) {
  unsigned char *b = (unsigned char *)buf;
  size_t got = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (got < n) {
      ssize_t k = read(fd, b + got, n - got);
      if (k <= 0) { if (k < 0 && errno == EINTR) continue; break; }
      got += (size_t)k;
    }
    close(fd);
  }
  if (got < n) {
    static unsigned long counter;
    struct timespec a, m;
    uint64_t h = 14695981039346656037ULL;
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &m);
    h = iris_detail_fnv(h, (uint64_t)a.tv_sec * 1000000000ULL + (uint64_t)a.tv_nsec);
    h = iris_detail_fnv(h, (uint64_t)m.tv_sec * 1000000000ULL + (uint64_t)m.tv_nsec);
    h = iris_detail_fnv(h, (uint64_t)getpid());
    h = iris_detail_fnv(h, (uint64_t)(uintptr_t)&a);
    for (; got < n; got++) {
      h = iris_detail_fnv(h, ++counter);
      b[got] = (unsigned char)(h >> 29);
    }
  }
}
/* This process's identity: 16 random bytes made once per process (again in a forked
 * child, which has another pid), so "same process" survives PID namespaces where two
 * processes share a pid. */
#define IRIS_DETAIL_TOKEN_BYTES 16
IRIS_INTERNAL void iris_detail_process_token(unsigned char out[IRIS_DETAIL_TOKEN_BYTES]) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static unsigned char token[IRIS_DETAIL_TOKEN_BYTES];
  static pid_t owner = 0;
  pthread_mutex_lock(&mu);
  if (owner != getpid()) {
    iris_detail_random(token, sizeof token);
    owner = getpid();
  }
  memcpy(out, token, sizeof token);
  pthread_mutex_unlock(&mu);
}
/* "0,2,3" from a flag array; returns buf */
IRIS_INTERNAL const char *iris_detail_rank_list(const unsigned char *flag, int n, char *buf, size_t cap) {
  size_t len = 0;
  int i, first = 1;
  buf[0] = 0;
  for (i = 0; i < n && len + 16 < cap; i++) {
    if (!flag[i]) continue;
    len += (size_t)snprintf(buf + len, cap - len, first ? "%d" : ",%d", i);
    first = 0;
  }
  return buf;
}

#endif /* IRIS_INTERNAL_CORE_UTIL_H */
