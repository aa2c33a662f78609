/* A minimal knee worker in C (docs/worker-protocol.md): every operation succeeds at once.
 *
 *   cc -O2 -o noop_worker noop_worker.c
 *   knee run -c 50 -d 10s --worker -- ./noop_worker
 *
 * It measures the protocol's own cost (knee's side of it: `make bench`), and its options make it
 * misbehave on purpose for knee's tests:
 *   --exit-after N        exit with status 3 after N replies (after saying why on stderr)
 *   --hang CLIENT:ID      never answer that operation (answer every other one)
 *   --garbage-after N     write a line that is not a reply after N replies
 *   --no-ready            never answer start
 *   --fail-every N        every Nth reply says ok:false with error "Nope"
 *
 * No shell, no libraries: it reads a line, finds "client" and "id", writes a reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long field(const char *line, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(line, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

int main(int argc, char **argv) {
    long exit_after = -1, garbage_after = -1, hang_client = -1, hang_id = -1, fail_every = 0;
    int no_ready = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exit-after") && i + 1 < argc) exit_after = atol(argv[++i]);
        else if (!strcmp(argv[i], "--garbage-after") && i + 1 < argc) garbage_after = atol(argv[++i]);
        else if (!strcmp(argv[i], "--fail-every") && i + 1 < argc) fail_every = atol(argv[++i]);
        else if (!strcmp(argv[i], "--hang") && i + 1 < argc) sscanf(argv[++i], "%ld:%ld", &hang_client, &hang_id);
        else if (!strcmp(argv[i], "--no-ready")) no_ready = 1;
        else { fprintf(stderr, "noop_worker: unknown option %s\n", argv[i]); return 2; }
    }
    static char buf[1 << 16];
    size_t have = 0;
    long replies = 0;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    for (;;) {
        ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            if (strstr(line, "\"op\":\"start\"")) {
                if (no_ready) { fprintf(stderr, "noop_worker: not answering start, as told\n"); pause(); }
                fputs("{\"ready\":true}\n", stdout);
            } else if (strstr(line, "\"op\":\"run\"")) {
                long client = field(line, "client"), id = field(line, "id");
                if (!(client == hang_client && id == hang_id)) {
                    if (garbage_after >= 0 && replies == garbage_after) fputs("this is not a reply\n", stdout);
                    replies++;
                    if (fail_every > 0 && replies % fail_every == 0)
                        printf("{\"client\":%ld,\"id\":%ld,\"ok\":false,\"error\":\"Nope\",\"message\":\"reply %ld refused\"}\n",
                               client, id, replies);
                    else
                        printf("{\"client\":%ld,\"id\":%ld,\"ok\":true}\n", client, id);
                    if (exit_after >= 0 && replies >= exit_after) {
                        fflush(stdout);
                        fprintf(stderr, "noop_worker: exiting after %ld replies, as told\n", replies);
                        return 3;
                    }
                }
            } else if (strstr(line, "\"op\":\"stop\"")) {
                fflush(stdout);
                return 0;
            }
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
        /* Everything read so far is answered: replies go out in one write, batched under load. */
        fflush(stdout);
    }
    fflush(stdout);
    return 0;
}
