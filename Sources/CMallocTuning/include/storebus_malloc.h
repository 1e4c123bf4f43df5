#ifndef STOREBUS_MALLOC_H
#define STOREBUS_MALLOC_H
// glibc's malloc thresholds, which Swift cannot set itself: mallopt and its parameters are in
// <malloc.h>, which Glibc's module does not import.

// Sets M_MMAP_THRESHOLD (blocks this large or larger get a mapping of their own) and
// M_TRIM_THRESHOLD (free memory at an arena's top beyond this goes back to the kernel), in bytes.
// Setting either ends glibc's own adjusting of both. Returns 1 when both were set, 0 otherwise
// (and always 0 where the C library is not glibc).
int storebus_malloc_set_thresholds(int mmap_threshold, int trim_threshold);

#endif
