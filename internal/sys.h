/* internal/sys.h: the system headers the implementation uses, and its linkage macros:
 * IRIS_DEF for the public functions (static under IRIS_STATIC), IRIS_INTERNAL for the
 * private ones, IRIS_DETAIL_TLS for thread-local data. Part of iris's implementation,
 * included first by iris.h under IRIS_IMPLEMENTATION (before its extern "C" block); not a
 * public header. */
#ifndef IRIS_INTERNAL_SYS_H
#define IRIS_INTERNAL_SYS_H

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
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

#endif /* IRIS_INTERNAL_SYS_H */
