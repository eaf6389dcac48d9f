/* The one translation unit that instantiates simba (stb-style). */
#define SIMBA_IMPLEMENTATION
#include "../simba.h"
#include "../simba_memory.h"
