/* Timing harness: runs the kernel `iters` times between two clock reads, so no
 * interpreter overhead is timed. Returns seconds per call. */
static double morello_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
