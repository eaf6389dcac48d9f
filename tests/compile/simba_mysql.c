/* simba_mysql.h alone, with its implementation, compiles warning-free (mk/mysql.mk: C99 and
   C++11, gcc and clang, -Wall -Wextra -Wpedantic -Werror). */
#define SIMBA_IMPLEMENTATION
#include "simba_mysql.h"

int main(void) {
    simba_result rc = simba_mysql_open(NULL, NULL, NULL);
    return rc == SIMBA_OK;
}
