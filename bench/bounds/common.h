/* What the least clients of bench/bounds.py share: their arguments, their clock, the service's address. */
#ifndef KNEE_BOUNDS_COMMON_H
#define KNEE_BOUNDS_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct bounds_args {
    int port, clients;
    double seconds;
    struct timespec t0;
};

/* PORT CLIENTS SECONDS, or the usage and exit 2. */
static struct bounds_args bounds_args(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT CLIENTS SECONDS\n", argv[0]);
        exit(2);
    }
    struct bounds_args a = {.port = atoi(argv[1]), .clients = atoi(argv[2]), .seconds = atof(argv[3])};
    return a;
}

/* Start the clock: running() is true until `seconds` have passed. */
static void bounds_start(struct bounds_args *a) { clock_gettime(CLOCK_MONOTONIC, &a->t0); }

static int bounds_running(const struct bounds_args *a) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - a->t0.tv_sec) + (double)(t.tv_nsec - a->t0.tv_nsec) / 1e9 < a->seconds;
}

#define BOUNDS_EVENTS 256

/* The epoll clients' loop: -1 once the time is up, else how many events of `ep` are ready in `ev` (room for
 * BOUNDS_EVENTS), after a wait of at most 0.1 s (the clock is read between waits). */
static int bounds_ready(const struct bounds_args *a, int ep, struct epoll_event *ev) {
    if (!bounds_running(a)) return -1;
    int k = epoll_wait(ep, ev, BOUNDS_EVENTS, 100);
    return k < 0 ? 0 : k; /* interrupted: none this time */
}

/* One read of descriptor `s` into `buf`: what was read; exits 1 (saying so) at its end or an error. */
static ssize_t bounds_read(int s, char *buf, size_t n) {
    ssize_t r = read(s, buf, n);
    if (r <= 0) {
        fprintf(stderr, "read: %zd\n", r);
        exit(1);
    }
    return r;
}

/* 127.0.0.1:port */
static struct sockaddr_in bounds_service(int port) {
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, "127.0.0.1", &s.sin_addr);
    return s;
}

#endif
