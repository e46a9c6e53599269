/* internal/core/sys.h: the system headers the implementation uses, and its linkage macros:
 * IRIS_DEF for the public functions (static under IRIS_STATIC), IRIS_INTERNAL for the
 * private ones, IRIS_DETAIL_TLS for thread-local data. Part of iris's implementation,
 * included first by iris.h under IRIS_IMPLEMENTATION (before its extern "C" block); not a
 * public header. */
#ifndef IRIS_INTERNAL_CORE_SYS_H
#define IRIS_INTERNAL_CORE_SYS_H

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
/* The implementation needs POSIX's declarations (clock_gettime, CLOCK_MONOTONIC, ...). A
 * strict C99 unit gets them only when iris.h, defining _POSIX_C_SOURCE, comes before every
 * system header; a header included earlier fixes the unit without them. One message
 * instead of a wall of undeclared names: */
#if !defined(CLOCK_MONOTONIC)
#error "iris: IRIS_IMPLEMENTATION needs POSIX declarations, and this unit has none (CLOCK_MONOTONIC is undeclared): include iris.h before any system header, or compile with -D_GNU_SOURCE (or -std=gnu99); C++ and gnu99 have them"
#define IRIS_DETAIL_NO_POSIX 1 /* iris.h then leaves its implementation out: one error, not dozens */
#endif

#if defined(IRIS_STATIC)
#define IRIS_DEF static
#else
#define IRIS_DEF
#endif
#define IRIS_INTERNAL static

#if defined(__cplusplus)
#define IRIS_DETAIL_TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define IRIS_DETAIL_TLS _Thread_local
#else
#define IRIS_DETAIL_TLS __thread
#endif

#ifndef SO_PEERCRED
#define SO_PEERCRED 17 /* Linux */
#endif

#endif /* IRIS_INTERNAL_CORE_SYS_H */
