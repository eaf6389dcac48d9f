/* simba_memory.h alone, with its implementation, compiles warning-free (mk/compile.mk: C99 and C++11,
   gcc and clang, -Wall -Wextra -Wpedantic -Werror). */
#define SIMBA_IMPLEMENTATION
#include "simba_memory.h"

int main(void) {
    simba_result rc = simba_memory_open(NULL, NULL, NULL);
    return rc == SIMBA_OK;
}
