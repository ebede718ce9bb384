// glibc's allocator tuning (mallopt, M_ARENA_MAX), which Swift's Glibc module leaves out.
#include <malloc.h>
