/* A strict C99 unit that includes a system header before iris.h and has no _GNU_SOURCE:
 * the implementation lacks POSIX's declarations. make test expects this unit NOT to
 * compile, with one error that names the rule (internal/core/sys.h), not one per
 * undeclared name. */
#include <stdio.h>
#define IRIS_IMPLEMENTATION
#include "iris.h"
int main(void) { return 0; }
