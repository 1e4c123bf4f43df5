#include <stdlib.h>

#include "storebus_malloc.h"

#if defined(__GLIBC__)
#include <malloc.h>

int storebus_malloc_set_thresholds(int mmap_threshold, int trim_threshold) {
    return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
}
#else
int storebus_malloc_set_thresholds(int mmap_threshold, int trim_threshold) {
    (void)mmap_threshold;
    (void)trim_threshold;
    return 0;
}
#endif
