/* simba.h alone, with its implementation, compiles warning-free (mk/compile.mk: C99 and C++11,
   gcc and clang, -Wall -Wextra -Wpedantic -Werror). */
#define SIMBA_IMPLEMENTATION
#include "simba.h"

int main(void) {
    simba_result rc = simba_name_check("compile-check");
    return rc == SIMBA_OK;
}
