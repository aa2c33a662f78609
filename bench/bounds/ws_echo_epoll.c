/* The least a WebSocket echo client can do per round trip: one write of a ready-made masked frame and the read of
 * its 7-byte echo, epoll for readiness, no parsing past the frame's length, no timing, no histogram. The opening
 * handshake is made once per connection, blocking, before the clock starts. bench/ws_bench.py holds knee's echo
 * round trips per CPU-s against it: the floor of this machine's kernel and server, as bench/bounds.py's are for HTTP.
 * usage: ws_echo_epoll PORT CLIENTS SECONDS */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char HANDSHAKE[] = "GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
/* "hello", a final text frame, masked with 1 2 3 4 (RFC 6455 §5.3: a client masks every frame) */
static const unsigned char FRAME[] = {0x81, 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1};
#define REPLY 7 /* 0x81 0x05 "hello" */

int main(int argc, char **argv) {
    struct bounds_args args = bounds_args(argc, argv);
    int ep = epoll_create1(0);
    int *got = calloc(65536, sizeof(int)); /* bytes of the current reply read so far, by descriptor */
    int *socks = calloc((size_t)args.clients, sizeof(int));
    long done = 0;
    char buf[4096];
    for (int i = 0; i < args.clients; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = bounds_service(args.port);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0 || write(s, HANDSHAKE, sizeof HANDSHAKE - 1) < 0) {
            perror("connect");
            return 1;
        }
        size_t n = 0;
        while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) { /* the answer's head, byte by byte */
            if (read(s, buf + n, 1) != 1 || ++n == sizeof buf) {
                fprintf(stderr, "handshake: no answer\n");
                return 1;
            }
        }
        if (strncmp(buf, "HTTP/1.1 101", 12) != 0) {
            fprintf(stderr, "handshake: %.40s\n", buf);
            return 1;
        }
        fcntl(s, F_SETFL, O_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.fd = s};
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
        socks[i] = s;
    }
    bounds_start(&args);
    for (int i = 0; i < args.clients; i++) {
        if (write(socks[i], FRAME, sizeof FRAME) < 0) {
            perror("write");
            return 1;
        }
    }
    struct epoll_event ev[BOUNDS_EVENTS];
    for (int k; (k = bounds_ready(&args, ep, ev)) >= 0;) {
        for (int i = 0; i < k; i++) {
            int s = ev[i].data.fd;
            got[s] += (int)bounds_read(s, buf, sizeof buf);
            while (got[s] >= REPLY) { /* one echo (or more) whole: send the next message */
                got[s] -= REPLY;
                done++;
                if (write(s, FRAME, sizeof FRAME) < 0) {
                    perror("write");
                    return 1;
                }
            }
        }
    }
    printf("messages %ld\n", done);
    return 0;
}
