/*
 * Reads a flow through libnetsift_client and prints what it saw, for tests/c_program.rs.
 *
 *     count <socket path>
 *
 * Every packet of a batch is kept (pointer only) until the batch is released and hashed only
 * then: under slow-reader preference the data must stay valid until netsift_release.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "netsift_client.h"

/* FNV-1a, 64 bits, continued over every packet's bytes in order. */
static uint64_t fnv(uint64_t h, const uint8_t *p, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

int main(int argc, char **argv) {
    char err[NETSIFT_ERRBUF_SIZE];
    if (argc != 2) {
        fprintf(stderr, "usage: count <socket path>\n");
        return 2;
    }
    printf("version=%s\n", netsift_version());
    printf("sizes=%zu,%zu,%zu\n", sizeof(netsift_options), sizeof(netsift_packet),
           sizeof(struct netsift_stats));

    netsift_client *c = netsift_connect(argv[1], err);
    if (c == NULL) {
        fprintf(stderr, "connect: %s\n", err);
        return 1;
    }
    netsift_options o;
    netsift_options_init(&o);
    netsift_flow *f =
        netsift_open(c, "(gen,11,3000) -> (bpf,\"tcp\") -> (packetcount,,8)", &o, err);
    if (f == NULL) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    /* Held packets never exceed the IBuf: the daemon cannot append beyond it until release. */
    netsift_packet *batch = malloc(sizeof *batch * o.ibuf);
    if (batch == NULL)
        return 1;
    uint64_t count = 0, caplen_sum = 0, hash = UINT64_C(0xcbf29ce484222325);
    while (!netsift_finished(f)) {
        netsift_wait(f, 64, 100);
        uint32_t n = 0;
        while (n < o.ibuf && netsift_next(f, &batch[n]) == 1)
            n++;
        for (uint32_t i = 0; i < n; i++) {
            count++;
            caplen_sum += batch[i].caplen;
            hash = fnv(hash, batch[i].data, batch[i].caplen);
        }
        netsift_release(f);
    }
    free(batch);
    uint64_t mbuf = 0;
    if (netsift_mbuf_get(f, 2, 0, &mbuf) != 0) {
        fprintf(stderr, "no MBuf word 0 for filter 2\n");
        return 1;
    }
    struct netsift_stats st;
    if (netsift_stats(f, &st, err) != 0) {
        fprintf(stderr, "stats: %s\n", err);
        return 1;
    }
    printf("count=%" PRIu64 " caplen_sum=%" PRIu64 " hash=%016" PRIx64 " mbuf=%" PRIu64
           " delivered=%" PRIu64 " linktype=%" PRIu32 "\n",
           count, caplen_sum, hash, mbuf, st.delivered, netsift_linktype(f));
    netsift_close(f);

    netsift_flow *bad = netsift_open(c, "(gen,1,1) -> (bpf,\"tcp port\")", NULL, err);
    if (bad != NULL) {
        fprintf(stderr, "a bad graph was accepted\n");
        return 1;
    }
    printf("bad graph error:\n%s\n", err);
    netsift_disconnect(c);
    return 0;
}
