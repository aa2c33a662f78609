/* The C fork/exec baseline for `make bench`: N children in flight, each fork() + execv(argv),
 * re-spawned as soon as one is reaped, for a fixed time. Prints one JSON line:
 *   {"ops": <exited 0>, "failed": <other exits>, "elapsed_s": <s>}
 * Usage: forkexec CONCURRENCY SECONDS PROGRAM [ARGS...]
 * Build: cc -O2 -o forkexec forkexec.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int spawn(char **argv) {
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return pid > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CONCURRENCY SECONDS PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    long concurrency = strtol(argv[1], NULL, 10);
    double seconds = strtod(argv[2], NULL);
    if (concurrency < 1 || seconds <= 0) {
        fprintf(stderr, "%s: CONCURRENCY must be >= 1 and SECONDS > 0\n", argv[0]);
        return 2;
    }
    char **child = argv + 3;
    long ops = 0, failed = 0, running = 0;
    double start = now(), deadline = start + seconds;
    for (long i = 0; i < concurrency; i++) {
        if (spawn(child) == 0) running++;
    }
    while (running > 0) {
        int status;
        if (wait(&status) < 0) break;
        running--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ops++;
        else failed++;
        if (now() < deadline && spawn(child) == 0) running++;
    }
    printf("{\"ops\": %ld, \"failed\": %ld, \"elapsed_s\": %.6f}\n", ops, failed, now() - start);
    return 0;
}
