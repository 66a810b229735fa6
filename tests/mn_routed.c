/* zc_routed_sendrecv across nodes: every pair and size byte-exact, all
 * ranks crossing nodes at once, per-rail shares, lists that disagree,
 * buffers in place, bad arguments. */
#include "config.h"

#include "mn_common.h"

static int salt_counter;

/* One transfer list, run and checked on every rank. */
static void run_transfers(zc_comm_h comm, const zc_transfer_t *t, int n, zc_datatype_t dtype)
{
    size_t elem = zc_datatype_size(dtype), send_bytes = 0, recv_bytes = 0;
    int from = -1, salt = ++salt_counter;

    for (int i = 0; i < n; i++) {
        if (t[i].src == mn_rank)
            send_bytes = (size_t)t[i].count * elem;
        if (t[i].dst == mn_rank) {
            recv_bytes = (size_t)t[i].count * elem;
            from = t[i].src;
        }
    }
    uint8_t *send = malloc(send_bytes + 1), *recv = malloc(recv_bytes + 1);
    pattern_fill(send, send_bytes, mn_rank, salt);
    memset(recv, 0xee, recv_bytes + 1);
    zc_request_h req;
    zc_status_t st = zc_routed_sendrecv(t, n, send, recv, dtype, ZC_MEM_HOST, comm, &req);
    MN_CHECK(st == ZC_OK, "zc_routed_sendrecv: %s", zc_strerror(st));
    if (st == ZC_OK) {
        st = zc_wait(&req);
        MN_CHECK(st == ZC_OK, "zc_wait: %s", zc_strerror(st));
    }
    if (from >= 0) {
        size_t wrong = pattern_first_wrong(recv, recv_bytes, from, salt);
        MN_CHECK(wrong == recv_bytes, "%zu bytes from rank %d: wrong at %zu", recv_bytes, from,
                 wrong);
        MN_CHECK(recv[recv_bytes] == 0xee, "byte past the end written");
    }
    free(send);
    free(recv);
}

int main(void)
{
    zc_comm_h comm = mn_init();
    int nrails = 0, nnodes = 0;
    static const int64_t sizes[] = {0, 1, 13, 4097, 300001, (1 << 20) + 5};
    char name[160];

    zc_comm_rail_count(comm, &nrails);
    zc_comm_node_count(comm, &nnodes);
    if (mn_rank == 0)
        printf("# %d ranks, %d nodes, %d rails\n", mn_size, nnodes, nrails);

    /* Every ordered pair, one transfer per call, every size class. */
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int src = 0; src < mn_size; src++)
            for (int dst = 0; dst < mn_size; dst++) {
                zc_transfer_t t = {src, dst, sizes[s]};
                run_transfers(comm, &t, 1, ZC_BYTE);
            }
        snprintf(name, sizeof(name), "every pair, %lld bytes, byte-exact", (long long)sizes[s]);
        mn_report(comm, name);
    }

    /* 16 MiB + 3 float32 elements between the two ends of the cluster: many
     * chunks per rail, a remainder that does not divide by the rails. */
    zc_transfer_t big = {0, mn_size - 1, (4 << 20) + 3};
    run_transfers(comm, &big, 1, ZC_FLOAT32);
    mn_report(comm, "16 MiB + 12 B float32, first rank to last, byte-exact");

    /* Every rank sends to the rank half a cluster away, all at once. */
    zc_transfer_t *all = calloc((size_t)mn_size, sizeof(*all));
    for (int r = 0; r < mn_size; r++)
        all[r] = (zc_transfer_t){r, (r + mn_size / 2) % mn_size, (1 << 20) + r};
    run_transfers(comm, all, mn_size, ZC_BYTE);
    mn_report(comm, "every rank across nodes at once (1 MiB + r), byte-exact");

    /* A ring (next rank), as the inter-node ring attention hops are. */
    for (int r = 0; r < mn_size; r++)
        all[r] = (zc_transfer_t){r, (r + 1) % mn_size, 777777};
    run_transfers(comm, all, mn_size, ZC_BYTE);
    mn_report(comm, "ring of 777777-byte transfers, byte-exact");

    /* A routed transfer puts bytes on every rail of both nodes. */
    if (nrails > 1 && nnodes > 1) {
        uint64_t before[16], after[16], recv;
        for (int k = 0; k < nrails && k < 16; k++)
            zc_comm_rail_bytes(comm, k, &before[k], &recv);
        zc_transfer_t t = {0, mn_size - 1, 8 << 20};
        uint64_t sent[16] = {0}, theirs[16];
        zc_request_h req;
        int node;

        run_transfers(comm, &t, 1, ZC_BYTE);
        /* Rank 0's node sends all of it, each rail its share by the rates
         * the call split by (through the proxy of that rail): rank 0 sums
         * its node's ranks rail by rail. */
        double rates[16], total_rate = 0;
        MN_CHECK(zc_comm_rail_rates(comm, rates, nrails) == ZC_OK, "the rails' rates");
        for (int k = 0; k < nrails && k < 16; k++)
            total_rate += rates[k];
        zc_comm_node(comm, &node);
        for (int k = 0; k < nrails && k < 16; k++) {
            zc_comm_rail_bytes(comm, k, &after[k], &recv);
            sent[k] = node == 0 ? after[k] - before[k] : 0;
        }
        for (int r = 1; r < mn_size; r++) {
            if (mn_rank == 0) {
                MN_CHECK(zc_recv(theirs, sizeof(theirs), ZC_BYTE, ZC_MEM_HOST, r, comm, &req) ==
                             ZC_OK && zc_wait(&req) == ZC_OK, "rail bytes of rank %d", r);
                for (int k = 0; k < 16; k++)
                    sent[k] += theirs[k];
            } else if (r == mn_rank) {
                MN_CHECK(zc_send(sent, sizeof(sent), ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) ==
                             ZC_OK && zc_wait(&req) == ZC_OK, "rail bytes to rank 0");
            }
        }
        for (int k = 0; mn_rank == 0 && k < nrails && k < 16; k++)
            MN_CHECK(rates[k] > 0 && (double)sent[k] >= (8 << 20) * (rates[k] / total_rate) - 1,
                     "rail %d of node 0 carried %llu of 8 MiB at %g of %g Gbit/s", k,
                     (unsigned long long)sent[k], rates[k], total_rate);
        mn_report(comm, "8 MiB routed: every rail of the sending node carries its share of the "
                  "rails' rates");
    }

    /* The plan's routes are the run's: a plan over this cluster's shape and
     * rails names, for each inter-node hop of its ring, the rank that sends
     * and the rank that receives each rail's slice, and, given the rates
     * the call split by (zc_comm_rail_rates), zc_plan_hop_slice its size.
     * Every rank checks its own rail counters against that, exactly: the
     * bytes it sent and received on each rail during the call, less those
     * of the same call moving nothing (the list agreement's). */
    if (nrails > 0 && nnodes > 1 && mn_size % nnodes == 0 && nnodes <= 16) {
        int ppn = mn_size / nnodes, layout_ok = 1;
        int64_t seq = (int64_t)mn_size * 100;
        zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
        zc_plan_h plan = NULL;
        const zc_plan_hop_t *hops = NULL;
        size_t nh = 0;

        /* the communicator the plan assumes: rank r on node r / ppn, its
         * GPU r % ppn on rail (r % ppn) * rails / ppn */
        for (int r = 0; r < mn_size; r++) {
            int node = -1, rail = -2;
            zc_comm_rank_node(comm, r, &node);
            zc_comm_rank_rail(comm, r, &rail);
            layout_ok &= node == r / ppn && rail == (r % ppn) * nrails / ppn;
        }
        /* elsewhere (the topology put ranks on other rails) the plan's
         * hops are not this run's routes (zc_plan_ring_hops(3)) */
        if (!layout_ok && mn_rank == 0)
            printf("# ranks are not on the nodes and rails a plan assumes: the plan's routes "
                   "are not compared with the run\n");
        opts.flags = ZC_PLAN_EVEN_SPLIT;
        opts.rails = nrails;
        MN_CHECK(zc_plan_create(nnodes, ppn, 100, &seq, 1, &opts, &plan) == ZC_OK &&
                     zc_plan_ring_hops(plan, 0, &hops, &nh) == ZC_OK && nh == (size_t)nnodes,
                 "plan of one sequence on the even ring: %zu hops", nh);
        if (layout_ok && nh == (size_t)nnodes) {
            zc_transfer_t hop_list[16], none[16];
            uint64_t s[3][ZC_PLAN_MAX_RAILS], r[3][ZC_PLAN_MAX_RAILS];
            uint64_t want_s[ZC_PLAN_MAX_RAILS] = {0}, want_r[ZC_PLAN_MAX_RAILS] = {0};
            size_t elem = zc_datatype_size(ZC_FLOAT32);

            /* one routed call with every hop of the ring, as ring attention
             * posts them; counts that do not divide by the rails */
            for (size_t h = 0; h < nh; h++) {
                hop_list[h] = (zc_transfer_t){hops[h].src_rank, hops[h].dst_rank,
                                              (1 << 20) + 1 + (int64_t)h};
                none[h] = (zc_transfer_t){hops[h].src_rank, hops[h].dst_rank, 0};
                MN_CHECK(hops[h].x_send == nrails && hops[h].x_recv == nrails,
                         "hop %zu: %d slices for %d rails", h, hops[h].x_send, nrails);
            }
            for (int k = 0; k < nrails; k++)
                zc_comm_rail_bytes(comm, k, &s[0][k], &r[0][k]);
            run_transfers(comm, none, (int)nh, ZC_FLOAT32);
            for (int k = 0; k < nrails; k++)
                zc_comm_rail_bytes(comm, k, &s[1][k], &r[1][k]);
            run_transfers(comm, hop_list, (int)nh, ZC_FLOAT32);
            /* the plan, cut by the rates that call split by */
            double rates[ZC_PLAN_MAX_RAILS];
            MN_CHECK(zc_comm_rail_rates(comm, rates, nrails) == ZC_OK &&
                         zc_plan_set_rail_rates(plan, rates, nrails) == ZC_OK,
                     "the plan given the call's rail rates");
            for (size_t h = 0; h < nh; h++) {
                for (int k = 0; k < nrails && k < hops[h].x_send; k++) {
                    int64_t off, len;
                    zc_plan_hop_slice(plan, hop_list[h].count, k, &off, &len);
                    want_s[k] += hops[h].send_proxies[k] == mn_rank ? (uint64_t)len * elem : 0;
                    want_r[k] += hops[h].recv_proxies[k] == mn_rank ? (uint64_t)len * elem : 0;
                }
            }
            for (int k = 0; k < nrails; k++) {
                zc_comm_rail_bytes(comm, k, &s[2][k], &r[2][k]);
                uint64_t sent = (s[2][k] - s[1][k]) - (s[1][k] - s[0][k]);
                uint64_t got = (r[2][k] - r[1][k]) - (r[1][k] - r[0][k]);
                MN_CHECK(sent == want_s[k] && got == want_r[k],
                         "rail %d: sent %llu and received %llu bytes, the plan says %llu and "
                         "%llu", k, (unsigned long long)sent, (unsigned long long)got,
                         (unsigned long long)want_s[k], (unsigned long long)want_r[k]);
            }
        }
        zc_plan_destroy(plan);
        if (layout_ok)
            mn_report(comm, "the plan's hops are the run's routes: each rank sends and "
                      "receives on each rail exactly the slices zc_plan_ring_hops and "
                      "zc_plan_hop_slice (with the call's rail rates) name");
    }

    /* Lists that differ at one rank only (rank 1, a proxy of the split
     * transfer, says one byte more): every rank fails with ZC_ERR_MISMATCH
     * before any data moves, small or split over the rails; the agreed
     * list then moves byte-exact on the same communicator. */
    static const int64_t disagree_sizes[] = {1000, 4 << 20};
    for (size_t s = 0; s < sizeof(disagree_sizes) / sizeof(disagree_sizes[0]); s++) {
        int64_t n = disagree_sizes[s];
        zc_transfer_t agreed = {0, mn_size - 1, n}, mine = {0, mn_size - 1, n + (mn_rank == 1)};
        uint8_t *send = calloc((size_t)n + 1, 1), *recv = malloc((size_t)n + 1);
        zc_request_h req = NULL;

        memset(recv, 0xee, (size_t)n + 1);
        zc_status_t st = zc_routed_sendrecv(&mine, 1, send, recv, ZC_BYTE, ZC_MEM_HOST, comm, &req);
        if (st == ZC_OK)
            st = zc_wait(&req);
        MN_CHECK(st == ZC_ERR_MISMATCH && strstr(zc_get_last_error(), "different transfer lists"),
                 "lists differing at rank 1 gave %s", zc_strerror(st));
        MN_CHECK(recv[0] == 0xee && recv[n - 1] == 0xee, "bytes arrived from a refused call");
        free(send);
        free(recv);
        run_transfers(comm, &agreed, 1, ZC_BYTE);
        snprintf(name, sizeof(name), "lists differing at one proxy, %lld bytes: ZC_ERR_MISMATCH "
                 "on every rank, nothing moved; the agreed list then byte-exact", (long long)n);
        mn_report(comm, name);
    }

    /* A ring in place (sendbuf == recvbuf) is refused on every rank; the
     * same ring with separate buffers then works. */
    for (int r = 0; r < mn_size; r++)
        all[r] = (zc_transfer_t){r, (r + 1) % mn_size, 3 << 20};
    uint8_t *inplace = malloc(3 << 20);
    zc_request_h inplace_req = NULL;
    zc_status_t inplace_st = zc_routed_sendrecv(all, mn_size, inplace, inplace, ZC_BYTE,
                                                ZC_MEM_HOST, comm, &inplace_req);
    MN_CHECK(inplace_st == ZC_ERR_INVALID_ARG &&
                 strstr(zc_get_last_error(), "sendbuf, recvbuf") && inplace_req == NULL,
             "a ring in place gave %s", zc_strerror(inplace_st));
    free(inplace);
    run_transfers(comm, all, mn_size, ZC_BYTE);
    mn_report(comm, "a 3 MiB ring in place is refused on every rank, then works with separate "
              "buffers");

    /* Bad arguments are refused on the rank that makes them (every rank
     * makes them here, so each refusal's agreement finds the others). */
    zc_request_h req = NULL;
    zc_transfer_t bad = {0, mn_size, 1};
    MN_CHECK(zc_routed_sendrecv(&bad, 1, NULL, NULL, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "dst"),
             "dst out of range refused");
    zc_transfer_t neg = {0, 1 % mn_size, -4};
    MN_CHECK(zc_routed_sendrecv(&neg, 1, NULL, NULL, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "count"),
             "negative count refused");
    zc_transfer_t two[2] = {{mn_rank, 0, 1}, {mn_rank, 0, 1}};
    MN_CHECK(zc_routed_sendrecv(two, 2, "x", NULL, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG, "a rank sending twice refused");
    MN_CHECK(zc_routed_sendrecv(&big, 1, NULL, NULL, ZC_BYTE, ZC_MEM_HOST, comm, NULL) ==
                 ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "request"),
             "NULL request refused");
    MN_CHECK(zc_routed_sendrecv(&big, -1, NULL, NULL, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_ERR_INVALID_ARG, "negative ntransfers refused");
    MN_CHECK(zc_routed_sendrecv(&big, 1, "x", "y", ZC_BYTE, ZC_MEM_CUDA, comm, &req) ==
                 ZC_ERR_UNSUPPORTED, "CUDA memory on the host path is unsupported");
    MN_CHECK(req == NULL, "no request written on failure");
    mn_report(comm, "bad arguments return ZC_ERR_INVALID_ARG naming the argument");
    free(all);
    return mn_finish(comm);
}
